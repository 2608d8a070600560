//! What a worker saw of the node it ran on: the CPU model and the network interfaces with their
//! MTU (a hostNetwork worker sees the node's; another sees its pod's, e.g. an overlay's smaller
//! MTU). Informational, for a result's cluster facts; bounded and checked like every report.

use serde::{Deserialize, Serialize};

use crate::report::{invalid, InvalidReport};

/// Most interfaces a report lists.
pub const MAX_INTERFACES: usize = 32;
/// Longest CPU model string.
pub const MAX_CPU_MODEL: usize = 128;

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct HostFacts {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_model: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub interfaces: Vec<Interface>,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct Interface {
    pub name: String,
    pub mtu: u32,
}

impl HostFacts {
    /// Refuses what no real host reports: long or unprintable text, odd interface names,
    /// MTUs outside 68..=65536, too many interfaces.
    pub fn validate(&self) -> Result<(), InvalidReport> {
        if let Some(model) = &self.cpu_model {
            let printable = model.chars().all(|c| c == ' ' || c.is_ascii_graphic());
            if model.len() > MAX_CPU_MODEL || !printable {
                return Err(invalid(
                    "host.cpuModel",
                    "not a CPU model (at most 128 printable ASCII characters)",
                ));
            }
        }
        if self.interfaces.len() > MAX_INTERFACES {
            return Err(invalid(
                "host.interfaces",
                format!("more than {MAX_INTERFACES}"),
            ));
        }
        for i in &self.interfaces {
            let ok_char = |c: char| c.is_ascii_alphanumeric() || "._@-".contains(c);
            if i.name.is_empty() || i.name.len() > 15 || !i.name.chars().all(ok_char) {
                return Err(invalid(
                    "host.interfaces.name",
                    format!("{:.32?} is not an interface name", i.name),
                ));
            }
            if !(68..=65536).contains(&i.mtu) {
                return Err(invalid(
                    "host.interfaces.mtu",
                    format!("{} is not an MTU", i.mtu),
                ));
            }
        }
        Ok(())
    }

    /// What this process sees: /proc/cpuinfo's first model name, and every interface under
    /// /sys/class/net but loopback (sorted, bounded). Missing files give no facts.
    pub fn read_local() -> HostFacts {
        let cpu_model = std::fs::read_to_string("/proc/cpuinfo")
            .ok()
            .and_then(|text| {
                text.lines()
                    .find(|l| l.starts_with("model name"))
                    .and_then(|l| l.split_once(':'))
                    .map(|(_, v)| {
                        v.trim()
                            .chars()
                            .filter(|c| c.is_ascii_graphic() || *c == ' ')
                            .take(MAX_CPU_MODEL)
                            .collect()
                    })
            });
        let mut interfaces: Vec<Interface> = std::fs::read_dir("/sys/class/net")
            .into_iter()
            .flatten()
            .flatten()
            .filter_map(|entry| {
                let name = entry.file_name().to_str()?.to_string();
                let mtu = std::fs::read_to_string(entry.path().join("mtu")).ok()?;
                Some(Interface {
                    name,
                    mtu: mtu.trim().parse().ok()?,
                })
            })
            .filter(|i| i.name != "lo")
            .collect();
        interfaces.sort_by(|a, b| a.name.cmp(&b.name));
        interfaces.truncate(MAX_INTERFACES);
        let facts = HostFacts {
            cpu_model,
            interfaces,
        };
        // Whatever the kernel showed, send only what the operator will accept.
        match facts.validate() {
            Ok(()) => facts,
            Err(_) => HostFacts::default(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_host_reads_as_valid_facts() {
        let facts = HostFacts::read_local();
        assert!(facts.validate().is_ok());
        assert!(facts.interfaces.iter().all(|i| i.name != "lo"));
    }

    #[test]
    fn hostile_facts_are_refused() {
        let iface = |name: &str, mtu| HostFacts {
            interfaces: vec![Interface {
                name: name.into(),
                mtu,
            }],
            ..Default::default()
        };
        assert!(iface("eth0", 1500).validate().is_ok());
        assert!(iface("eth0", 0).validate().is_err());
        assert!(iface("eth0", 1 << 20).validate().is_err());
        assert!(iface("../../x", 1500).validate().is_err());
        assert!(iface("averyveryverylongname", 1500).validate().is_err());
        let model = |m: &str| HostFacts {
            cpu_model: Some(m.into()),
            ..Default::default()
        };
        assert!(model("Intel(R) Xeon(R) CPU @ 2.20GHz").validate().is_ok());
        assert!(model("evil\nline").validate().is_err());
        assert!(model(&"x".repeat(200)).validate().is_err());
        let many = HostFacts {
            interfaces: (0..40)
                .map(|i| Interface {
                    name: format!("e{i}"),
                    mtu: 1500,
                })
                .collect(),
            ..Default::default()
        };
        assert!(many.validate().is_err());
    }
}
