/// Text helpers that the rest of the package would otherwise take from full Foundation (keyseald links
/// FoundationEssentials only, for a smaller resident image).
extension StringProtocol {
    /// The text without the leading and trailing characters `isTrimmed` picks (by default white space and
    /// line breaks).
    package func trimmed(_ isTrimmed: (Character) -> Bool = { $0.isWhitespace }) -> String {
        guard let first = firstIndex(where: { !isTrimmed($0) }) else { return "" }
        let last = lastIndex(where: { !isTrimmed($0) })!
        return String(self[first...last])
    }
}
