"""A minimal stand-in for the parts of Gymnasium that PettingZoo 1.24.3's MPE
imports (gymnasium is not installed where the tables are generated): spaces.Box
and spaces.Discrete with contains(), utils.seeding.np_random, utils.EzPickle
and logger.warn. Nothing here touches the dynamics; it only lets PettingZoo's
own code run."""

from . import logger, spaces, utils  # noqa: F401
