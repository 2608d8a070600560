//! The reasons a request is refused for, one list for the refusals (`refusal`) and the metric
//! that counts them (`metrics`).

/// Every reason a request can be refused for (the label values of `netbench_api_rejected_total`;
/// each series exists at 0 from the start).
pub const REASONS: [&str; 20] = [
    "unauthenticated",
    "bad_token",
    "unknown_run",
    "unknown_worker",
    "wrong_worker",
    "wrong_role",
    "wrong_step",
    "unregistered",
    "too_large",
    "malformed",
    "invalid_report",
    "version",
    "timeout",
    "header_timeout",
    "too_many_connections",
    "auth_unavailable",
    "not_a_worker",
    "listen_not_own",
    "node_not_own",
    "address_unknown",
];
