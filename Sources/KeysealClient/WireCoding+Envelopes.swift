import FoundationEssentials

// The envelopes: a request sent on behalf of another process and a request carrying an authentication, each
// wrapping one inner request (never another envelope). Each encoding (a `WireWriter` method) stands beside its
// decoding (the `WireReader` method of the same name).

// MARK: - onBehalf: the pid, then an item request

extension WireWriter {
    /// Throws errSecParam for an inner request that cannot be sent on behalf of another process.
    mutating func onBehalf(pid: Int32, _ request: WireRequest) throws(KeychainError) {
        guard request.mayBeSentOnBehalf else {
            throw KeychainError(
                status: KeychainStatus.param,
                message: "\(request.name) cannot be sent on behalf of another process"
            )
        }
        u32(UInt32(bitPattern: pid))
        try request.encode(into: &self)
    }
}

extension WireReader {
    /// Whether the inner request may be sent on behalf is checked by `WireRequest.decode(payload:)`.
    mutating func onBehalf(nested: Bool) throws(KeychainError) -> WireRequest {
        guard !nested else { throw Self.malformed("an on-behalf request inside another") }
        let pid = Int32(bitPattern: try u32())
        return .onBehalf(pid: pid, try WireRequest.decodeBody(&self, nested: true))
    }
}

// MARK: - authenticated: the optional token, the reuse seconds, the UI, then the request it authenticates

extension WireWriter {
    /// Throws errSecParam for an inner request that cannot carry an authentication.
    mutating func authenticated(_ authentication: ItemAuthentication, _ request: WireRequest) throws(KeychainError) {
        guard request.mayBeAuthenticated else {
            throw KeychainError(
                status: KeychainStatus.param,
                message: "\(request.name) cannot carry an authentication"
            )
        }
        optional(authentication.token) { w, token in w.secret(token) }
        u32(UInt32(authentication.reuseSeconds))
        u8(authentication.ui.rawValue)
        try request.encode(into: &self)
    }
}

extension WireReader {
    mutating func authenticated(nested: Bool) throws(KeychainError) -> WireRequest {
        guard !nested else { throw Self.malformed("an authenticated request inside another") }
        let token = try optional { r throws(KeychainError) in try r.secret() }
        let reuse = try u32()
        guard reuse <= UInt32(ItemAuthentication.maximumReuseSeconds) else {
            throw Self.malformed("the reuse duration is over \(ItemAuthentication.maximumReuseSeconds) s")
        }
        guard let ui = AuthenticationUI(rawValue: try u8()) else {
            throw Self.malformed("unknown authentication UI")
        }
        let inner = try WireRequest.decodeBody(&self, nested: true)
        guard inner.mayBeAuthenticated else {
            throw Self.malformed("an authenticated request carries \(inner.name)")
        }
        return .authenticated(ItemAuthentication(token: token, reuseSeconds: Int(reuse), ui: ui), inner)
    }
}
