// Dotted quads read without regular expressions or splitting: validation, sorting and family
// checks look at every endpoint address, a million of them at 100k Services.

/**
 * The value of a dotted quad as node:net's isIPv4 accepts it (four decimal octets of at most
 * 255, no leading zeros), or -1 when the text is not one.
 */
export function ipv4Value(text: string): number {
  const n = text.length;
  if (n < 7 || n > 15) return -1;
  let value = 0;
  let octet = 0;
  let digits = 0;
  let dots = 0;
  for (let i = 0; i < n; i++) {
    const c = text.charCodeAt(i);
    if (c === 46) {
      if (digits === 0 || dots === 3) return -1;
      value = value * 256 + octet;
      octet = 0;
      digits = 0;
      dots++;
    } else if (c >= 48 && c <= 57) {
      // "0" alone is an octet; "01" is not.
      if (digits === 1 && octet === 0) return -1;
      octet = octet * 10 + (c - 48);
      if (octet > 255) return -1;
      digits++;
    } else return -1;
  }
  if (digits === 0 || dots !== 3) return -1;
  return value * 256 + octet;
}
