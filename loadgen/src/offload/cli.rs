//! `offload get|set --interface IF [--feature NAME=on|off ...]`: JSON on stdout.

use std::io::{self, Write};

use anyhow::{bail, Context};

/// Read or change ethtool offload features of a device (in this network namespace).
#[derive(Debug, clap::Args)]
pub struct OffloadArgs {
    #[command(subcommand)]
    pub action: OffloadAction,
}

#[derive(Debug, clap::Subcommand)]
pub enum OffloadAction {
    /// Print every feature (kernel and ethtool legacy names) as JSON.
    Get {
        #[arg(short, long, value_name = "IF")]
        interface: String,
    },
    /// Change features; prints before/after/restore as JSON.
    Set {
        #[arg(short, long, value_name = "IF")]
        interface: String,
        /// NAME=on|off; repeat for several.
        #[arg(short, long = "feature", value_name = "NAME=on|off", required = true)]
        features: Vec<String>,
    },
}

pub fn run(args: &OffloadArgs) -> anyhow::Result<()> {
    match &args.action {
        OffloadAction::Get { interface } => print_json(&super::get(interface)?),
        OffloadAction::Set {
            interface,
            features,
        } => {
            let requests = features
                .iter()
                .map(|s| super::parse_setting(s))
                .collect::<Result<Vec<_>, _>>()?;
            let report = super::set(interface, &requests)?;
            print_json(&report)?;
            if !report.not_applied.is_empty() {
                bail!(
                    "{interface} did not take {} (a feature they depend on may be off)",
                    report.not_applied.join(", ")
                );
            }
            Ok(())
        }
    }
}

fn print_json(value: &impl serde::Serialize) -> anyhow::Result<()> {
    let text = serde_json::to_string_pretty(value).context("encoding JSON")? + "\n";
    io::stdout()
        .write_all(text.as_bytes())
        .context("writing to stdout")
}
