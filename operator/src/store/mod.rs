//! What the operator keeps: worker reports, restore records and run records (ConfigMaps in its own
//! namespace), and the in-memory registry of the runs under way.

pub mod owner;
pub mod records;
pub mod registry;
pub mod reports;
pub mod run_record;
