"""The `steerable` command line: one module per subcommand, thin over the library."""
