"""Looking inside trained models: attention maps, interventions on positions, linear probes,
the geometry of a learned position table, and n-gram baselines."""
