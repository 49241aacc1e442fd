// The versions an agent announces in its registration.

/** This SDK's version, sent to the gateway as `node/<version>`. */
export const SDK_VERSION = '0.1.0';
/** The agent protocol version this SDK speaks (docs/agent-protocol.md). */
export const PROTOCOL_VERSION = 1;
