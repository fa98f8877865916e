// The request, record and status types and `SecretBytes` are KeysealModel's (shared with the wire and the command
// line); the engine's modules see them through KeysealCore.
@_exported import KeysealModel
