//! The run model.
