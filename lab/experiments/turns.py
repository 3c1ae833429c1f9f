"""Jobs that take turns (the Training and Dropout pages' runs side by side): one thread per job, exactly one
running at a time, handing over at the boundaries each job marks, so a run stopped part-way has come as far in
every job, and the order (hence the result) is the same every time."""
from __future__ import annotations

import threading


class Turns:
    """Runs n jobs in threads that take turns: exactly one runs at a time and hands over at `next(i)` (a
    boundary job i marks: an evaluation, a logged point), round robin over the jobs not yet finished, so the
    order is fixed and the results repeatable. An exception in one job (Stop's, a bad setting's) ends the
    others at their next turn and is raised by `run`."""

    class _Abort(Exception):
        pass

    def __init__(self, n: int) -> None:
        self.n, self.turn, self.live = n, 0, set(range(n))
        self.cv = threading.Condition()
        self.error: BaseException | None = None

    def _wait(self, i: int) -> None:
        with self.cv:
            self.cv.wait_for(lambda: self.turn == i or self.error is not None)
            if self.error is not None:
                raise self._Abort()

    def _hand_over(self, i: int) -> None:
        with self.cv:
            others = sorted(self.live - {i}) if i in self.live else sorted(self.live)
            if others:
                self.turn = next((j for j in others if j > i), others[0])
            self.cv.notify_all()

    def next(self, i: int) -> None:
        """Job i reached a turn boundary: the next live job runs; i waits for its turn again."""
        if len(self.live) > 1:
            self._hand_over(i)
            self._wait(i)

    def run(self, jobs: list) -> list:
        out: list = [None] * self.n

        def body(i: int) -> None:
            try:
                self._wait(i)
                out[i] = jobs[i]()
            except self._Abort:
                pass
            except BaseException as e:  # noqa: BLE001 - handed to the caller below
                with self.cv:
                    self.error = self.error or e
                    self.cv.notify_all()
            finally:
                with self.cv:
                    self.live.discard(i)
                    if self.live and self.turn == i:
                        self.turn = next((j for j in sorted(self.live) if j > i), min(self.live))
                    self.cv.notify_all()

        threads = [threading.Thread(target=body, args=(i,), daemon=True, name=f"train-{i}") for i in range(self.n)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        if self.error is not None:
            raise self.error
        return out
