"""The GC lab family's tools: scenarios (`labkit gc run`) and the GC decision log (`labkit gc log`)."""
