//! The `loadgen` command line: one subcommand per tool (see `loadgen --help`).

fn main() -> anyhow::Result<()> {
    voxgate_loadgen::cli::main()
}
