//! netbench-operator library.
