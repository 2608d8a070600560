//! `kubectl-netbench`: the same command line as a kubectl plugin (`kubectl netbench ...`).

fn main() -> std::process::ExitCode {
    netbench_cli::app::main_named("kubectl netbench")
}
