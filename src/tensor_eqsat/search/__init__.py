"""Construction strategies: the saturation runner (TENSAT baseline) and MCTS."""
