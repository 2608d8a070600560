//! `offload get|set --interface IF [--feature NAME=on|off ...]`: JSON on stdout.

use std::io::{self, Write};
use std::path::{Path, PathBuf};

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
        /// Also print the whole kernel-feature state as one line `netbench-offload-state {JSON}`
        /// (what the operator records before a change).
        #[arg(long)]
        state: bool,
    },
    /// Change features; prints before/after/restore as JSON.
    Set {
        #[arg(short, long, value_name = "IF")]
        interface: String,
        /// NAME=on|off; repeat for several.
        #[arg(short, long = "feature", value_name = "NAME=on|off", required = true)]
        features: Vec<String>,
        /// Also write a one-line JSON summary here: {"interface", "before", "applied",
        /// "restore"} (written even when a request was not honoured, so it can be undone).
        #[arg(long, value_name = "PATH")]
        summary_file: Option<PathBuf>,
        /// Also print the whole kernel-feature state after the change, read back from the
        /// kernel, as one line `netbench-offload-state {JSON}` (also when a request was not
        /// honoured).
        #[arg(long)]
        state: bool,
    },
    /// Read back features and exit 1 naming every one not in the given state.
    Verify {
        #[arg(short, long, value_name = "IF")]
        interface: String,
        /// NAME=on|off; repeat for several.
        #[arg(short, long = "feature", value_name = "NAME=on|off", required = true)]
        features: Vec<String>,
    },
}

/// Kubernetes keeps at most this much of /dev/termination-log.
const TERMINATION_LOG_MAX: usize = 4096;

pub fn run(args: &OffloadArgs) -> anyhow::Result<()> {
    match &args.action {
        OffloadAction::Get { interface, state } => {
            let (report, device) = super::get_with_state(interface)?;
            print_json(&report)?;
            if *state {
                print_line(&device.line())?;
            }
            Ok(())
        }
        OffloadAction::Verify {
            interface,
            features,
        } => verify(interface, &parse_settings(features)?),
        OffloadAction::Set {
            interface,
            features,
            summary_file,
            state,
        } => {
            let requests = parse_settings(features)?;
            let report = super::set(interface, &requests)?;
            // The summary first: if anything below fails, the change can still be undone.
            if let Some(path) = summary_file {
                write_summary(path, &report.summary())?;
            }
            print_json(&report)?;
            if *state {
                print_line(&report.state_after.line())?;
            }
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

fn parse_settings(features: &[String]) -> anyhow::Result<Vec<(String, bool)>> {
    Ok(features
        .iter()
        .map(|s| super::parse_setting(s))
        .collect::<Result<Vec<_>, _>>()?)
}

/// Prints the state line, then fails naming every feature not as requested.
fn verify(interface: &str, requests: &[(String, bool)]) -> anyhow::Result<()> {
    let (_, device) = super::get_with_state(interface)?;
    print_line(&device.line())?;
    let wrong: Vec<String> = requests
        .iter()
        .filter(|(name, on)| device.value(name) != Some(*on))
        .map(|(name, on)| {
            let is = device
                .value(name)
                .map_or("missing", |v| if v { "on" } else { "off" });
            format!("{name}={} (is {is})", super::OnOff::from(*on))
        })
        .collect();
    if !wrong.is_empty() {
        bail!("{interface} differs: {}", wrong.join(", "));
    }
    Ok(())
}

fn print_line(line: &str) -> anyhow::Result<()> {
    io::stdout()
        .write_all(format!("{line}\n").as_bytes())
        .context("writing to stdout")
}

fn write_summary(path: &Path, summary: &super::SetSummary) -> anyhow::Result<()> {
    let line = serde_json::to_string(summary).context("encoding the summary")? + "\n";
    if line.len() > TERMINATION_LOG_MAX {
        tracing::warn!(
            bytes = line.len(),
            "the summary is longer than a Kubernetes termination message keeps (4096 bytes)"
        );
    }
    std::fs::write(path, line).with_context(|| format!("writing the summary to {}", path.display()))
}

fn print_json(value: &impl serde::Serialize) -> anyhow::Result<()> {
    let text = serde_json::to_string_pretty(value).context("encoding JSON")? + "\n";
    io::stdout()
        .write_all(text.as_bytes())
        .context("writing to stdout")
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        offload: OffloadArgs,
    }

    #[test]
    fn set_takes_an_optional_summary_file() {
        let cli = Cli::try_parse_from([
            "x",
            "set",
            "-i",
            "vx0",
            "-f",
            "tx-checksumming=off",
            "--feature",
            "gro=on",
            "--summary-file",
            "/dev/termination-log",
        ])
        .unwrap();
        let OffloadAction::Set {
            interface,
            features,
            summary_file,
            ..
        } = cli.offload.action
        else {
            panic!("parsed as get");
        };
        assert_eq!(interface, "vx0");
        assert_eq!(features, ["tx-checksumming=off", "gro=on"]);
        assert_eq!(summary_file, Some(PathBuf::from("/dev/termination-log")));
        let Ok(Cli {
            offload:
                OffloadArgs {
                    action: OffloadAction::Set { summary_file, .. },
                },
        }) = Cli::try_parse_from(["x", "set", "-i", "vx0", "-f", "tx=off"])
        else {
            panic!("set without --summary-file");
        };
        assert_eq!(summary_file, None);
        assert!(
            Cli::try_parse_from(["x", "set", "-i", "vx0", "-f", "tx=off", "--summary-file"])
                .is_err()
        );
        assert!(
            Cli::try_parse_from(["x", "get", "-i", "vx0", "--summary-file", "/tmp/x"]).is_err()
        );
    }

    #[test]
    fn get_and_set_take_state_and_verify_needs_features() {
        let Ok(Cli {
            offload:
                OffloadArgs {
                    action: OffloadAction::Get { state: true, .. },
                },
        }) = Cli::try_parse_from(["x", "get", "-i", "vx0", "--state"])
        else {
            panic!("get --state");
        };
        let Ok(Cli {
            offload:
                OffloadArgs {
                    action: OffloadAction::Set { state: true, .. },
                },
        }) = Cli::try_parse_from(["x", "set", "-i", "vx0", "-f", "tx=off", "--state"])
        else {
            panic!("set --state");
        };
        assert!(Cli::try_parse_from(["x", "verify", "-i", "vx0"]).is_err());
        assert!(Cli::try_parse_from(["x", "verify", "-i", "vx0", "-f", "tx=on"]).is_ok());
    }
}
