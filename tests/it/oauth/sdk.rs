//! Placeholder: the TypeScript SDK end to end.
