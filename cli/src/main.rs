//! `netbench`: the user command line.

fn main() -> std::process::ExitCode {
    netbench_cli::app::main_named("netbench")
}
