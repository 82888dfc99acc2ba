//! caching_sha2_password's full authentication across a plain client leg and a TLS upstream.
//!
//! On full authentication (the first login of a user since the server started), a MySQL 8
//! server over TLS expects the password in clear, while a client on a plain connection asks
//! for the server's RSA key (0x02) to encrypt it. Relayed as is, the server would read the key
//! request as a password and refuse the login. So when (and only when) freshet's client leg is
//! plain and its upstream leg is TLS, freshet answers the key request itself with its own
//! RSA key, decrypts the client's answer, and sends the password in clear over the upstream's
//! TLS. The password exists only in this function's memory for that moment; nothing is kept.
//!
//! The client encrypts `(password + NUL) XOR scramble` (the scramble repeated) with
//! RSA-OAEP(SHA-1), the scramble being the 20 bytes of the handshake or of the last auth switch.
//! The key is generated once per process, lazily, on a blocking thread.

use rsa::pkcs8::{EncodePublicKey, LineEnding};
use rsa::{Oaep, RsaPrivateKey, RsaPublicKey};

/// The packet a client sends to ask for the server's public key.
pub const REQUEST_PUBLIC_KEY: u8 = 0x02;
/// The server's "perform full authentication" packet.
pub const PERFORM_FULL_AUTH: [u8; 2] = [0x01, 0x04];
pub const PLUGIN: &str = "caching_sha2_password";

pub struct BridgeKey {
    private: RsaPrivateKey,
    public_pem: String,
}

#[derive(Debug, thiserror::Error)]
pub enum BridgeError {
    #[error("RSA key generation failed: {0}")]
    KeyGen(String),
    #[error("the client's encrypted password could not be decrypted: {0}")]
    Decrypt(String),
}

impl BridgeKey {
    pub fn generate(bits: usize) -> Result<Self, BridgeError> {
        let private = RsaPrivateKey::new(&mut rsa::rand_core::OsRng, bits).map_err(|e| BridgeError::KeyGen(e.to_string()))?;
        let public_pem = RsaPublicKey::from(&private).to_public_key_pem(LineEnding::LF).map_err(|e| BridgeError::KeyGen(e.to_string()))?;
        Ok(BridgeKey { private, public_pem })
    }

    /// The key-response packet: 0x01 then the PEM text.
    pub fn key_packet(&self) -> Vec<u8> {
        [&[0x01u8][..], self.public_pem.as_bytes()].concat()
    }

    /// The modulus size: the length of the client's encrypted answer.
    pub fn size(&self) -> usize {
        rsa::traits::PublicKeyParts::size(&self.private)
    }

    /// `password + NUL` from the client's encrypted answer.
    pub fn decrypt_password(&self, ciphertext: &[u8], scramble: &[u8]) -> Result<Vec<u8>, BridgeError> {
        let mut plain = self.private.decrypt(Oaep::new::<sha1::Sha1>(), ciphertext).map_err(|e| BridgeError::Decrypt(e.to_string()))?;
        xor_with_scramble(&mut plain, scramble);
        Ok(plain)
    }
}

/// XOR with the scramble repeated; its own inverse.
pub fn xor_with_scramble(data: &mut [u8], scramble: &[u8]) {
    if scramble.is_empty() {
        return;
    }
    for (i, b) in data.iter_mut().enumerate() {
        *b ^= scramble[i % scramble.len()];
    }
}

#[cfg(test)]
pub(crate) fn encrypt_like_a_client(key_packet: &[u8], password: &str, scramble: &[u8]) -> Vec<u8> {
    use rsa::pkcs8::DecodePublicKey;
    let pem = std::str::from_utf8(&key_packet[1..]).expect("PEM is text");
    let public = RsaPublicKey::from_public_key_pem(pem).expect("valid public key");
    let mut data = [password.as_bytes(), b"\0"].concat();
    xor_with_scramble(&mut data, scramble);
    public.encrypt(&mut rsa::rand_core::OsRng, Oaep::new::<sha1::Sha1>(), &data).expect("encrypt")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_clients_encrypted_password_decrypts() {
        let key = BridgeKey::generate(1024).unwrap();
        let scramble: Vec<u8> = (1..=20).collect();
        let packet = key.key_packet();
        assert!(packet[1..].starts_with(b"-----BEGIN PUBLIC KEY-----"));
        let cipher = encrypt_like_a_client(&packet, "s3cret with a long tail beyond twenty bytes", &scramble);
        assert_eq!(cipher.len(), key.size());
        assert_eq!(key.decrypt_password(&cipher, &scramble).unwrap(), b"s3cret with a long tail beyond twenty bytes\0");
        assert!(key.decrypt_password(&[7; 128], &scramble).is_err());
    }
}
