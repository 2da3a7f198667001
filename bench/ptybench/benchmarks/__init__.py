"""One module per benchmark family; each is a mixin of bench_* methods over the Harness."""
