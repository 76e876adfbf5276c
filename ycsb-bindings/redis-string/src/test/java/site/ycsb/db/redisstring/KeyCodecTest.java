package site.ycsb.db.redisstring;

import static org.junit.Assert.assertArrayEquals;
import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertThrows;
import static org.junit.Assert.assertTrue;

import java.nio.charset.StandardCharsets;
import java.util.HashSet;
import java.util.Random;
import java.util.Set;

import org.junit.Test;
import site.ycsb.Utils;

/** The YCSB key to Redis key mapping, without a server. */
public class KeyCodecTest {

  @Test
  public void recordNumberIsZeroPaddedToTheKeyLength() {
    assertEquals("00000042", KeyCodec.encodeToString("user42", 8));
    assertEquals("00000000", KeyCodec.encodeToString("user0", 8));
    assertEquals("99999999", KeyCodec.encodeToString("user99999999", 8));
    assertEquals("7", KeyCodec.encodeToString("user7", 1));
    assertEquals("000000000000000000000042", KeyCodec.encodeToString("user42", 24));
  }

  @Test
  public void bytesAreTheAsciiDigitsOfExactlyTheKeyLength() {
    for (int length = 1; length <= 20; length++) {
      byte[] key = KeyCodec.encode("user1", length);
      assertEquals(length, key.length);
      assertEquals(1, key[length - 1] - '0');
      for (int i = 0; i < length - 1; i++) {
        assertEquals('0', key[i]);
      }
    }
    assertArrayEquals("00000042".getBytes(StandardCharsets.US_ASCII),
        KeyCodec.encode("user42", 8));
  }

  @Test
  public void ycsbZeroPaddingAndThePrefixDoNotMatter() {
    // CoreWorkload's zeropadding property: "user" + zeros + number.
    assertEquals("00000042", KeyCodec.encodeToString("user00000042", 8));
    assertEquals("00000042", KeyCodec.encodeToString("user0000000000000042", 8));
    assertEquals("00000000", KeyCodec.encodeToString("user00000000000", 8));
    assertEquals("00000042", KeyCodec.encodeToString("42", 8));
    assertEquals("00000042", KeyCodec.encodeToString("usertable:42", 8));
  }

  @Test
  public void numbersThatNeedMoreDigitsAreRefusedNamingKeyLengthAndFix() {
    IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
        () -> KeyCodec.encode("user100000000", 8));
    assertTrue(e.getMessage(), e.getMessage().contains("'user100000000'"));
    assertTrue(e.getMessage(), e.getMessage().contains("redis.keylength=8"));
    assertTrue(e.getMessage(), e.getMessage().contains("insertorder=ordered"));
    assertTrue(e.getMessage(), e.getMessage().contains("9 digits"));

    e = assertThrows(IllegalArgumentException.class, () -> KeyCodec.encode("user10", 1));
    assertTrue(e.getMessage(), e.getMessage().contains("'user10'"));
  }

  @Test
  public void keysWithoutDigitsAreRefusedNamingTheKey() {
    for (String key : new String[] {"user", "", "usertable", "user-x"}) {
      IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
          () -> KeyCodec.encode(key, 8));
      assertTrue(e.getMessage(), e.getMessage().contains("'" + key + "'"));
      assertTrue(e.getMessage(), e.getMessage().contains("no decimal digits"));
    }
  }

  @Test
  public void keysWithTextAfterTheNumberAreRefused() {
    IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
        () -> KeyCodec.encode("user12x", 8));
    assertTrue(e.getMessage(), e.getMessage().contains("'user12x'"));
    e = assertThrows(IllegalArgumentException.class, () -> KeyCodec.encode("user 1 2", 8));
    assertTrue(e.getMessage(), e.getMessage().contains("'user 1 2'"));
  }

  @Test
  public void keyLengthBelowOneIsRefused() {
    IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
        () -> KeyCodec.encode("user1", 0));
    assertTrue(e.getMessage(), e.getMessage().contains("redis.keylength=0"));
  }

  @Test
  public void mappingIsInjectiveAndKeepsTheNumber() {
    Set<String> seen = new HashSet<>();
    for (long n = 0; n < 200_000; n++) {
      String key = KeyCodec.encodeToString("user" + n, 8);
      assertEquals(8, key.length());
      assertEquals(n, Long.parseLong(key));
      assertTrue("duplicate " + key, seen.add(key));
    }
    // Large numbers near the limit.
    for (long n = 99_999_000L; n <= 99_999_999L; n++) {
      String key = KeyCodec.encodeToString("user" + n, 8);
      assertEquals(n, Long.parseLong(key));
      assertTrue("duplicate " + key, seen.add(key));
    }
  }

  @Test
  public void hashedKeysFitNineteenDigitsOnly() {
    // insertorder=hashed: YCSB numbers record n with Utils.hash(n), up to 19 digits.
    assertEquals(19, RedisStringClient.HASHED_KEY_DIGITS);
    Random random = new Random(42);
    Set<String> seen = new HashSet<>();
    for (int i = 0; i < 10_000; i++) {
      long hash = Utils.hash(random.nextInt(1_000_000_000));
      String key = KeyCodec.encodeToString("user" + hash, 19);
      assertEquals(19, key.length());
      assertEquals(hash, Long.parseLong(key));
      seen.add(key);
    }
    assertTrue(seen.size() > 9_900);
    String maxKey = KeyCodec.encodeToString("user" + Long.MAX_VALUE, 19);
    assertEquals(Long.toString(Long.MAX_VALUE), maxKey);
    assertThrows(IllegalArgumentException.class,
        () -> KeyCodec.encode("user" + Utils.hash(42), 8));
  }

  @Test
  public void decimalDigits() {
    assertEquals(1, KeyCodec.decimalDigits(0));
    assertEquals(8, KeyCodec.decimalDigits(99_999_999));
    assertEquals(9, KeyCodec.decimalDigits(100_000_000));
  }
}
