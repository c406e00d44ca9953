// Reading a file named on the command line, bounded. Only a regular file is read (a FIFO, a
// device such as /dev/zero or a directory is refused at once: it could block for ever or never
// end), and only up to a size limit, so a wrong path costs an error message, not the host's
// memory. The file is opened without blocking, so even opening a FIFO with no writer returns.

import { constants } from "node:fs";
import { type FileHandle, open } from "node:fs/promises";

const FLAGS = constants.O_RDONLY | constants.O_NONBLOCK;

function check(path: string, isFile: boolean, size: number, maxBytes: number, flag: string): void {
  if (!isFile) throw new Error(`${path} is not a regular file (a FIFO, device or directory is not read)`);
  if (size > maxBytes)
    throw new Error(`${path} is ${size} bytes, more than ${maxBytes}${flag === "" ? "" : ` (${flag})`}`);
}

/** A file opened for reading, checked to be a regular file within the limit. */
export interface BoundedFile {
  readonly handle: FileHandle;
  /** Its size when opened. */
  readonly size: number;
}

/**
 * Opens the file; throws when it is not a regular file or is larger than `maxBytes`. `flag` names
 * the option that raises the limit. The caller closes the handle.
 */
export async function openBoundedFile(path: string, maxBytes: number, flag = ""): Promise<BoundedFile> {
  const handle = await open(path, FLAGS);
  try {
    const st = await handle.stat();
    check(path, st.isFile(), st.size, maxBytes, flag);
    return { handle, size: st.size };
  } catch (err) {
    await handle.close();
    throw err;
  }
}

/**
 * The whole file, at most `maxBytes`. Throws when it is not a regular file or is larger; `flag`
 * names the option that raises the limit.
 */
export async function readBoundedFile(path: string, maxBytes: number, flag = ""): Promise<Buffer> {
  const file = await openBoundedFile(path, maxBytes, flag);
  try {
    return await readOpenedFile(path, file, maxBytes, flag);
  } finally {
    await file.handle.close();
  }
}

/** readBoundedFile of a file opened by openBoundedFile, from its first byte; the caller closes it. */
export async function readOpenedFile(
  path: string,
  { handle, size }: BoundedFile,
  maxBytes: number,
  flag = "",
): Promise<Buffer> {
  // The file may grow between stat and read: the buffer grows up to one byte past the limit.
  // Never from Buffer's shared pool, so that releaseFileBytes may free it; never zero-filled,
  // since only the bytes read are handed out.
  let buffer = Buffer.allocUnsafeSlow(Math.min(size, maxBytes) + 1);
  let length = 0;
  for (;;) {
    if (length === buffer.length) {
      check(path, true, length, maxBytes, flag);
      const grown = Buffer.allocUnsafeSlow(Math.min(buffer.length * 2, maxBytes + 1));
      buffer.copy(grown);
      buffer = grown;
    }
    const { bytesRead } = await handle.read(buffer, length, buffer.length - length, length);
    if (bytesRead === 0) return buffer.subarray(0, length);
    length += bytesRead;
  }
}

/**
 * Frees the memory of a buffer that readBoundedFile returned, now: once a large cluster file is
 * parsed its bytes are dead, but V8 frees them only at its next full collection, and until then
 * they sit beside the state built from them. The buffer reads as empty afterwards. Only for
 * buffers that own their memory alone: readBoundedFile's, and others from allocUnsafeSlow.
 */
export function releaseFileBytes(bytes: Buffer): void {
  const memory = bytes.buffer;
  if (memory instanceof ArrayBuffer && !memory.detached) memory.transfer(0);
}
