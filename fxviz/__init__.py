"""fxviz: see and change torch.fx graphs (public API is filled in as modules land)."""
from fxviz.errors import FxvizError, PassError, RenderError, TraceError

__version__ = "0.1.0"
