//! freshet-dataflow: partially-stateful views compiled from SQL (the dataflow issue).
