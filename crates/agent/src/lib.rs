//! reef-agent: reef's turn engine: context assembly, the model/tool loop, budgets, parallel tool dispatch and large-output handling.
