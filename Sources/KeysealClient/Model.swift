// The requests and records the wire carries are KeysealModel's, the engine's own types; the client's users see them
// through KeysealClient.
@_exported import KeysealModel
