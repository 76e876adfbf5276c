package site.ycsb.db.redisstring;

import java.nio.charset.StandardCharsets;

/**
 * Maps a YCSB key to a Redis key of an exact length.
 *
 * <p>YCSB's {@code CoreWorkload} names record {@code n} {@code "user"} + zero padding + the decimal
 * digits of {@code n} (with {@code insertorder=hashed}, of a 64-bit hash of {@code n}). This codec
 * keeps only the number: it takes the decimal digits after the key's non-digit prefix and writes
 * that number in decimal, zero-padded to exactly {@code keyLength} ASCII bytes. Record 42 with
 * {@code keyLength} 8 becomes {@code "00000042"}. The mapping is injective over the numbers that
 * fit (distinct numbers give distinct keys; the prefix and YCSB's own zero padding do not
 * matter), and a number that needs more than {@code keyLength} digits is refused rather than
 * truncated, since truncation would silently merge records.
 *
 * <p>Pure and stateless.
 */
public final class KeyCodec {

  private KeyCodec() {
  }

  /**
   * The Redis key of a YCSB key, as ASCII bytes.
   *
   * @param ycsbKey   a key built by YCSB's workload: a non-digit prefix, then decimal digits only
   * @param keyLength the exact length of the Redis key in bytes (at least 1)
   * @return {@code keyLength} ASCII digits
   * @throws IllegalArgumentException if the key has no digits, has anything but digits after its
   *                                  first digit, or its number needs more than {@code keyLength}
   *                                  digits; the message names the key and what to change
   */
  public static byte[] encode(String ycsbKey, int keyLength) {
    return encodeToString(ycsbKey, keyLength).getBytes(StandardCharsets.US_ASCII);
  }

  /**
   * The Redis key of a YCSB key, as a string of {@code keyLength} ASCII digits.
   *
   * @see #encode(String, int)
   */
  public static String encodeToString(String ycsbKey, int keyLength) {
    if (keyLength < 1) {
      throw new IllegalArgumentException(RedisStringClient.KEY_LENGTH_PROPERTY + "=" + keyLength
          + ": the key length must be at least 1 byte");
    }
    if (ycsbKey == null) {
      throw new IllegalArgumentException("YCSB key is null");
    }
    int firstDigit = 0;
    while (firstDigit < ycsbKey.length() && !isDigit(ycsbKey.charAt(firstDigit))) {
      firstDigit++;
    }
    if (firstDigit == ycsbKey.length()) {
      throw new IllegalArgumentException("YCSB key '" + ycsbKey + "' has no decimal digits: this "
          + "binding maps YCSB's numbered keys (\"user\" + record number) to zero-padded numbers");
    }
    for (int i = firstDigit; i < ycsbKey.length(); i++) {
      if (!isDigit(ycsbKey.charAt(i))) {
        throw new IllegalArgumentException("YCSB key '" + ycsbKey + "' has a non-digit after its "
            + "number: this binding maps YCSB's numbered keys (\"user\" + record number) to "
            + "zero-padded numbers");
      }
    }
    // Drop the leading zeros (YCSB's zeropadding) and keep at least one digit.
    int significant = firstDigit;
    while (significant < ycsbKey.length() - 1 && ycsbKey.charAt(significant) == '0') {
      significant++;
    }
    int digits = ycsbKey.length() - significant;
    if (digits > keyLength) {
      throw new IllegalArgumentException("YCSB key '" + ycsbKey + "': its number "
          + ycsbKey.substring(significant) + " has " + digits + " digits and does not fit "
          + RedisStringClient.KEY_LENGTH_PROPERTY + "=" + keyLength + " bytes; use "
          + "insertorder=ordered (as workloads/workloada.properties does) so that record numbers "
          + "stay below recordcount, with recordcount <= 10^" + keyLength + ", or a larger "
          + RedisStringClient.KEY_LENGTH_PROPERTY);
    }
    StringBuilder key = new StringBuilder(keyLength);
    for (int i = digits; i < keyLength; i++) {
      key.append('0');
    }
    key.append(ycsbKey, significant, ycsbKey.length());
    return key.toString();
  }

  /** How many decimal digits the non-negative number {@code n} has (1 for 0). */
  static int decimalDigits(long n) {
    return Long.toString(n).length();
  }

  private static boolean isDigit(char c) {
    return c >= '0' && c <= '9';
  }
}
