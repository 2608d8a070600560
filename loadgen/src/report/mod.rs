//! The human summary of an HTTP report. The report types, their histogram encoding, exact
//! merge and validation are the `protocol` crate's ([`protocol::report`]).

mod text;

pub use text::http_summary;
