"""Small pieces every layer may use: the one LRU map, long-lived thread pools."""
