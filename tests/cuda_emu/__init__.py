"""The CPU emulation of CUDA the `emu` tests run kernels/*.cu on (harness.py, cuda_emu.h)."""

RECORDS_ENV = "PARALAB_EMU_RECORDS"  # a directory the test session's processes share for `harness.report`
