// The packet mark every kernel backend uses to ask its masquerading chain for SNAT: the same bit
// in nft and iptables, so switching backends on a node never leaves a connection marked for a
// meaning the other backend does not share.

/** The default mark: kube-proxy's masqueradeBit 14. */
export const MASQUERADE_MARK = "0x4000";
