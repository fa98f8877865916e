import Foundation

/// Fixed test material: a P-256 key and two self-signed certificates for it (openssl, 2026): "Keyseal Test"
/// (serial 0x1234, with a subject key identifier) and "Keyseal Test Two" (serial 0x5678).
public enum KeyTestMaterial {
    /// The private key in Apple's external representation, `04 ‖ X ‖ Y ‖ K`.
    public static let privateKey = hex(
        "041dab2ddab2cb3dc219cf199bbd5dd164c2fcae3c4dfe6310dfad0bc9ec439a458b92de1a7127b67c67e7fdafa88cfb5283",
        "aae1c0681b3a7896d783feee39150d785a2c6e8c6461b2cdb472dfdf0a03ce72ead699aba03c013469462401ff0d4f"
    )

    /// The public key, `04 ‖ X ‖ Y`.
    public static var publicKey: Data { privateKey.prefix(65) }

    public static let certificate = hex(
        "308201943082013ba00302010202021234300a06082a8648ce3d04030230293115301306035504030c0c4b65797365616c20",
        "546573743110300e060355040a0c074b65797365616c301e170d3236313132343138353432355a170d333631313231313835",
        "3432355a30293115301306035504030c0c4b65797365616c20546573743110300e060355040a0c074b65797365616c305930",
        "1306072a8648ce3d020106082a8648ce3d030107034200041dab2ddab2cb3dc219cf199bbd5dd164c2fcae3c4dfe6310dfad",
        "0bc9ec439a458b92de1a7127b67c67e7fdafa88cfb5283aae1c0681b3a7896d783feee39150da3533051301f0603551d2304",
        "1830168014a4b3f9a12c0d7d59c3242e3badd4410441cf8a14300f0603551d130101ff040530030101ff301d0603551d0e04",
        "160414a4b3f9a12c0d7d59c3242e3badd4410441cf8a14300a06082a8648ce3d040302034700304402204c0259087abb6c2e",
        "c8b265b57aa55fb28144525207666af31c806bbc9936ca0102203f52b4731ddd69e1fd779010d08cf2ccbca52cf31f7781c4",
        "941aa1001ecc0136"
    )

    public static let secondCertificate = hex(
        "3082019c30820143a00302010202025678300a06082a8648ce3d040302302d3119301706035504030c104b65797365616c20",
        "546573742054776f3110300e060355040a0c074b65797365616c301e170d3236313132343138353432355a170d3336313132",
        "313138353432355a302d3119301706035504030c104b65797365616c20546573742054776f3110300e060355040a0c074b65",
        "797365616c3059301306072a8648ce3d020106082a8648ce3d030107034200041dab2ddab2cb3dc219cf199bbd5dd164c2fc",
        "ae3c4dfe6310dfad0bc9ec439a458b92de1a7127b67c67e7fdafa88cfb5283aae1c0681b3a7896d783feee39150da3533051",
        "301d0603551d0e04160414a4b3f9a12c0d7d59c3242e3badd4410441cf8a14301f0603551d23041830168014a4b3f9a12c0d",
        "7d59c3242e3badd4410441cf8a14300f0603551d130101ff040530030101ff300a06082a8648ce3d04030203470030440220",
        "5adc57583d3cfd0933b2798fafe9ce078911c720f2118f710b35c6b25412c7e70220561016add1f49e57d66ca54abd83fcf9",
        "3961bec7ccda90b474c8708754be376c"
    )

    /// The first certificate's subject key identifier.
    public static let subjectKeyID = hex("A4B3F9A12C0D7D59C3242E3BADD4410441CF8A14")

    public static func hex(_ parts: String...) -> Data {
        let text = parts.joined()
        var data = Data()
        var index = text.startIndex
        while index < text.endIndex {
            let next = text.index(index, offsetBy: 2)
            data.append(UInt8(text[index..<next], radix: 16)!)
            index = next
        }
        return data
    }
}
