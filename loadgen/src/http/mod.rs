//! The HTTP load engine.
//!
//! Closed loop (like wrk) or open loop (like wrk2, latency from each request's intended send
//! time), keep-alive on or off, HTTP/1.1 on a lean hand-written client, HTTP/2 via `h2`, TLS via
//! rustls. Typical use:
//!
//! ```no_run
//! use loadgen::http::{run, HttpConfig, HttpOptions};
//! let mut opts = HttpOptions::new("http://127.0.0.1:8080/");
//! opts.connections = 50;
//! opts.threads = 1;
//! opts.duration = "5s".into();
//! let cfg = HttpConfig::from_options(&opts)?;
//! let report = run(&cfg, None)?;
//! println!("{}", report.to_json());
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod answers;
mod config;
mod connect;
mod duration;
mod engine;
mod gate;
mod h1;
mod h2conn;
mod preflight;
mod progress;
mod recv;
mod request;
mod response;
mod stats;
mod timer;
mod tls;

pub use config::{ConfigError, HttpConfig, HttpOptions, Scheme};
pub use duration::parse_duration;
pub use engine::{run, HttpError};
pub use preflight::preflight;
pub use progress::{IntervalLatency, Progress, ProgressSink};
pub use stats::ErrorClass;
