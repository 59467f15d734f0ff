//! Who created a session's call: what (besides the operator) controls its sessions afterwards.

use super::call_token::CallTokenId;

/// Who created a session: the credential that alone (besides the operator) controls it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Creator {
    /// Created on an open server.
    #[default]
    Anyone,
    Operator,
    Call(CallTokenId),
}
