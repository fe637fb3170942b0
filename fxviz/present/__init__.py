"""How a node, a step and a graph are shown, once, for the Explorer and the report alike: display strings, the node table's columns, charts, escaping, the front-ends' assets."""
