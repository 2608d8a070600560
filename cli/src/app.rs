//! The command line: arguments, and which command runs.

use std::process::ExitCode;

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};

use crate::kube_client::ClusterArgs;
use crate::watch::render::Outcome;
use crate::watch::End;

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
    /// Compare two results figure by figure: B against A (the baseline); or, with --history,
    /// list the change points of every figure over a benchmark's history.
    Compare(crate::compare::CompareArgs),
    /// Follow a benchmark's run until it ends (exit 0 Succeeded, 1 Failed).
    Watch(crate::watch::WatchArgs),
    /// Write JUnit XML from results: run succeeded, thresholds met, one case per judged figure.
    Junit(crate::junit::JunitArgs),
}

/// Exit codes besides 0: 1 is the command's own "no" (a regression with --fail-on-regression,
/// a failed run), 2 an error (bad input, no cluster, a timeout), 130 ctrl-c.
pub const EXIT_NO: u8 = 1;
pub const EXIT_ERROR: u8 = 2;
pub const EXIT_INTERRUPTED: u8 = 130;

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
    let c = &cli.cluster;
    Ok(match &cli.command {
        Command::Report(args) => {
            crate::report::run(args, c).await?;
            ExitCode::SUCCESS
        }
        Command::Compare(args) => match crate::compare::run(args, c).await? {
            true => ExitCode::from(EXIT_NO),
            false => ExitCode::SUCCESS,
        },
        Command::Watch(args) => match crate::watch::run(args, c).await? {
            End::Run(Outcome::Succeeded) => ExitCode::SUCCESS,
            End::Run(Outcome::Failed) => ExitCode::from(EXIT_NO),
            End::Interrupted => ExitCode::from(EXIT_INTERRUPTED),
        },
        Command::Junit(args) => {
            crate::junit::run(args, c).await?;
            ExitCode::SUCCESS
        }
    })
}
