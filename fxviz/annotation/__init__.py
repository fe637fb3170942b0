"""What each node is: the annotated run (shapes, dtypes, FLOPs), shapes a graph already carries, and the networkx records every view reads."""
