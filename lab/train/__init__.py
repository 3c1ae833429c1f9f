"""Training: models, simulated data/model-parallel training with codecs on the wire,
consistency models, and every codec as a real DDP communication hook."""
from .ddp_hook import CodecHookState, codec_hook
from .models import MLP, SmallCNN, build_model
from .run import TrainConfig, TrainResult, train

__all__ = ["CodecHookState", "codec_hook", "MLP",
           "SmallCNN", "build_model", "TrainConfig", "TrainResult", "train"]
