"""fxviz: see and change torch.fx graphs.

The headless library. The Jupyter layer lives in ``fxviz.widgets`` and is only
imported by :func:`explore`, so ``import fxviz`` stays light and kernel-free.
"""
from fxviz.errors import FxvizError, PassError, RenderError, TraceError
from fxviz.graph import to_networkx
from fxviz.render import Rendering, to_dot, to_svg
from fxviz.shapes import annotate
from fxviz.trace import trace

__version__ = "0.1.0"
