//! The command line: arguments, and which command runs.

use std::process::ExitCode;

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};

use crate::kube_client::ClusterArgs;

/// Reports, comparisons, live progress and JUnit results of netbench benchmarks
/// (IngressBenchmark, EgressBenchmark) and their BenchmarkResults.
#[derive(Parser, Debug)]
#[command(name = "netbench", version)]
pub struct Cli {
    #[command(flatten)]
    pub cluster: ClusterArgs,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Write report.md and SVG charts from results (of the cluster or files).
    Report(crate::report::ReportArgs),
}

/// Exit codes besides 0: 1 is the command's own "no" (a regression, a failed run), 2 an error.
pub const EXIT_ERROR: u8 = 2;

/// Runs the command line as `name` (netbench, or "kubectl netbench" for the plugin).
pub fn main_named(name: &'static str) -> ExitCode {
    let matches = Cli::command().name(name).bin_name(name).get_matches();
    let cli = match Cli::from_arg_matches(&matches) {
        Ok(cli) => cli,
        Err(e) => e.exit(),
    };
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::from(EXIT_ERROR);
        }
    };
    match runtime.block_on(run(cli)) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(EXIT_ERROR)
        }
    }
}

async fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    match &cli.command {
        Command::Report(args) => crate::report::run(args, &cli.cluster)
            .await
            .map(|()| ExitCode::SUCCESS),
    }
}
