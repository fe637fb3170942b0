"""The Jupyter layer of fxviz: the Explorer workbench and its graph view.

Imported only on demand (``fxviz.explore``), so ``import fxviz`` needs no ipywidgets.
"""
from .explorer import Explorer, explore
from .graph_view import GraphView
from .table_view import TableView

__all__ = ["Explorer", "GraphView", "TableView", "explore"]
