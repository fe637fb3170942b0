"""Drawing a graph: the box tree, what to lay out, Graphviz, and the colour modes."""
