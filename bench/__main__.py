"""`python -m bench` (`make bench`): the search benchmark; pass its options through."""

from bench.search_bench import main

main()
