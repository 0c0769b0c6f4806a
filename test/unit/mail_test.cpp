#include <fstream>
#include <sstream>
#include <thread>

#include <gtest/gtest.h>
#include <rapidjson/pointer.h>

#include "runtime/dedupe.hpp"
#include "runtime/ingest.hpp"
#include "runtime/json.hpp"
#include "runtime/mail.hpp"

namespace butlers {
namespace {

std::string fixture(const std::string& name) {
  std::ifstream in{BUTLERS_SOURCE_DIR "/test/fixtures/mail/" + name,
                   std::ios::binary};
  EXPECT_TRUE(in.good()) << name;
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

mail_message parse_ok(const std::string& name) {
  auto r = parse_mail(fixture(name));
  EXPECT_TRUE(r.message.has_value()) << name << ": " << r.error;
  EXPECT_EQ(r.error, "");
  return r.message.value_or(mail_message{});
}

std::string parse_error(const std::string& name) {
  auto r = parse_mail(fixture(name));
  EXPECT_FALSE(r.message.has_value()) << name;
  return r.error;
}

constexpr int64_t now_us = 1700000000000000;

/// The envelope of `m` through the canonical ingest validator.
inbox_record ingest(const mail_message& m,
                    const std::string& mailbox = "butlers@example.net") {
  mail_ingest_options opts;
  opts.mailbox = mailbox;
  opts.now_us = now_us;
  auto body = mail_to_ingest(m, opts);
  auto r = parse_ingest(body, 1 << 20, 300, now_us);
  EXPECT_TRUE(r.record.has_value())
    << body << "\n"
    << r.parse_error
    << (r.violations.empty()
          ? ""
          : " " + r.violations[0].pointer + " " + r.violations[0].message);
  return r.record.value_or(inbox_record{});
}

std::string pointer(const std::string& envelope, const char* ptr) {
  rapidjson::Document doc;
  EXPECT_FALSE(json::parse(envelope, doc).has_value());
  auto* v = rapidjson::Pointer(ptr).Get(doc);
  if (v == nullptr)
    return "<absent>";
  return v->IsString() ? std::string{v->GetString()} : json::to_string(*v);
}

// -- parsing: the corpus ------------------------------------------------------

TEST(Mail, MultipartAlternativeTakesThePlainPartAndTheHeaders) {
  auto m = parse_ok("multipart_alternative.eml");
  EXPECT_EQ(m.message_id, "alt-1@mail.example.org");
  EXPECT_EQ(m.from.address, "alice@example.org") << "domain lower-cased";
  EXPECT_EQ(m.from.name, "Alice Example");
  ASSERT_EQ(m.to.size(), 2u);
  EXPECT_EQ(m.to[0].address, "butlers@example.net");
  EXPECT_EQ(m.to[0].name, "Butlers");
  EXPECT_EQ(m.to[1].address, "bob@example.com");
  EXPECT_EQ(m.subject, "Lunch on Friday?");
  EXPECT_EQ(m.date, "2024-03-01T09:30:00+01:00");
  EXPECT_EQ(m.date_us, int64_t{1709281800} * 1000000);
  EXPECT_EQ(m.text, "Hi there,\n\nShall we have lunch on Friday? Caf\u00e9 at "
                    "noon.\n\nAlice");
  EXPECT_FALSE(m.text_from_html);
  EXPECT_TRUE(m.warnings.empty());
  EXPECT_EQ(m.in_reply_to, "");
  EXPECT_TRUE(m.references.empty());
}

TEST(Mail, QuotedPrintableIsDecodedWithSoftLineBreaksJoined) {
  auto m = parse_ok("quoted_printable.eml");
  EXPECT_EQ(m.text, "Price: 20 \u20ac for the caf\u00e9 tour, na\u00efve "
                    "question: this line is long enough that "
                    "quoted-printable has to wrap it with a soft line break "
                    "somewhere.\nSecond line.");
}

TEST(Mail, Base64IsDecoded) {
  auto m = parse_ok("base64.eml");
  EXPECT_EQ(m.text, "Gr\u00fc\u00dfe aus M\u00fcnchen!\nZweite Zeile \u2014 "
                    "mit Gedankenstrich.");
  EXPECT_EQ(m.from.name, "Dieter");
}

TEST(Mail, Iso88591BodyHeaderAndDisplayNameBecomeUtf8) {
  auto m = parse_ok("iso_8859_1.eml");
  EXPECT_EQ(m.text, "La r\u00e9union est d\u00e9plac\u00e9e \u00e0 "
                    "No\u00ebl. \u00c7a va?");
  EXPECT_EQ(m.subject, "R\u00e9union \u00e0 No\u00ebl");
  EXPECT_EQ(m.from.name, "Fran\u00e7ois") << "a raw 8-bit header";
}

TEST(Mail, Windows1252QuotesEuroAndDashesBecomeUtf8) {
  auto m = parse_ok("windows_1252.eml");
  EXPECT_EQ(m.text, "\u201cQuoted\u201d text costs \u20ac20 \u2013 "
                    "that\u2019s all\u2026");
}

TEST(Mail, UndeclaredEightBitTextIsReadAsWindows1252) {
  auto m = parse_ok("no_charset_8bit.eml");
  EXPECT_EQ(m.text, "Undeclared 8-bit: caf\u00e9 \u20ac 5.");
}

TEST(Mail, QEncodedWordsInSubjectAndNameAreDecoded) {
  auto m = parse_ok("encoded_subject_q.eml");
  EXPECT_EQ(m.subject, "\u00dcber die Stra\u00dfe \u2013 ein Test");
  EXPECT_EQ(m.from.name, "J\u00fcrgen M\u00fcller");
  EXPECT_EQ(m.text, "Plain ASCII body.");
}

TEST(Mail, BEncodedWordsAreJoinedAcrossFoldsAndCharsets) {
  auto m = parse_ok("encoded_subject_b.eml");
  EXPECT_EQ(m.subject, "\u65e5\u672c\u8a9e\u306e\u4ef6\u540d and caf\u00e9");
  EXPECT_EQ(m.date, "2024-03-07T15:00:00+09:00");
  EXPECT_EQ(m.text, "\u672c\u6587\u3067\u3059\u3002");
}

TEST(Mail, WithoutMessageIdTheContentHashIsTheIdentity) {
  auto raw = fixture("no_message_id.eml");
  auto m = parse_ok("no_message_id.eml");
  EXPECT_EQ(m.message_id, "");
  EXPECT_EQ(m.content_sha256, sha256_hex(raw));
}

TEST(Mail, HtmlOnlyMailGivesReadableText) {
  auto m = parse_ok("html_only.eml");
  EXPECT_TRUE(m.text_from_html);
  EXPECT_EQ(m.text, "Hello world & friends <3\n\n"
                    "Line two\u2014with a dash \u263a and \u00e9t\u00e9\n"
                    "after break\n\n"
                    "first\nsecond\n\n"
                    "a b\n\n"
                    "Unknown &bogus; stays, and 5 < 6.");
  EXPECT_EQ(m.text.find("hidden"), std::string::npos) << "script dropped";
  EXPECT_EQ(m.text.find("color"), std::string::npos) << "style dropped";
  EXPECT_EQ(m.text.find("Ignored title"), std::string::npos);
  EXPECT_EQ(m.text.find("comment"), std::string::npos);
}

TEST(Mail, ReplyHasItsThreadingHeadersAndReplyTo) {
  auto m = parse_ok("reply_with_references.eml");
  EXPECT_EQ(m.message_id, "r3@mail.example.org");
  EXPECT_EQ(m.in_reply_to, "r2@mail.example.org");
  EXPECT_EQ(m.references, (std::vector<std::string>{"root@mail.example.org",
                                                    "r1@mail.example.org",
                                                    "r2@mail.example.org"}));
  ASSERT_EQ(m.reply_to.size(), 1u);
  EXPECT_EQ(m.reply_to[0].address, "alice.work@example.org");
  EXPECT_EQ(m.reply_to[0].name, "Alice Work");
  EXPECT_EQ(m.text, "Yes, noon works.\n\n> Shall we?");
}

TEST(Mail, NestedMultipartsFindThePlainTextAndSkipAttachments) {
  auto m = parse_ok("nested_multipart.eml");
  EXPECT_EQ(m.text, "The plain version, nested two levels deep.");
  EXPECT_FALSE(m.text_from_html);
}

TEST(Mail, CrLfLineEndsBecomeLf) {
  auto m = parse_ok("crlf_line_ends.eml");
  EXPECT_EQ(m.subject, "CRLF");
  EXPECT_EQ(m.text, "First line.\nSecond line.");
}

TEST(Mail, AutoSubmittedIsKept) {
  auto m = parse_ok("auto_replied.eml");
  EXPECT_EQ(m.auto_submitted, "auto-replied");
  EXPECT_EQ(parse_ok("multipart_alternative.eml").auto_submitted, "");
}

TEST(Mail, ATruncatedMultipartKeepsTheTextThatArrivedAndSaysSo) {
  auto m = parse_ok("truncated_multipart_with_text.eml");
  EXPECT_EQ(m.text, "The text that arrived before the connection dro");
  EXPECT_EQ(m.warnings, std::vector<std::string>{"truncated message"});
}

TEST(Mail, GarbageBytesAreAnError) {
  EXPECT_EQ(parse_error("malformed_garbage.eml"),
            "no header block (not an RFC 5322 message)");
}

TEST(Mail, HeadersWithoutFromAreAnError) {
  EXPECT_EQ(parse_error("malformed_no_from.eml"), "no From mailbox");
}

TEST(Mail, AMultipartCutBeforeAnyPartIsAnError) {
  EXPECT_EQ(parse_error("malformed_truncated_multipart.eml"),
            "no text/plain or text/html body and no file");
}

TEST(Mail, EmptyInputIsAnError) {
  EXPECT_EQ(parse_mail("").error, "empty");
  EXPECT_EQ(parse_mail(" \n\n").error, "empty");
}

TEST(Mail, FilesAreTheLeafPartsThatAreNotTheBody) {
  auto m = parse_ok("nested_multipart.eml");
  EXPECT_EQ(m.text, "The plain version, nested two levels deep.");
  ASSERT_EQ(m.attachments.size(), 2u)
    << "the inline image and the attached notes; neither text alternative";
  EXPECT_EQ(m.attachments[0].media_type, "image/png");
  EXPECT_EQ(m.attachments[0].name, "");
  EXPECT_EQ(m.attachments[0].bytes, std::string("\x89PNG\r\n\x1a\n", 8))
    << "base64 undone";
  EXPECT_EQ(m.attachments[1].media_type, "text/plain");
  EXPECT_EQ(m.attachments[1].name, "notes.txt");
  EXPECT_EQ(m.attachments[1].bytes, "Attached notes, not the body.");
  EXPECT_TRUE(parse_ok("multipart_alternative.eml").attachments.empty());
}

TEST(Mail, AMailOfOnlyAFileHasNoTextAndTheFile) {
  auto pdf_only = "From: a@example.org\nMIME-Version: 1.0\n"
                  "Content-Type: Application/PDF; name=\"scan.pdf\"\n"
                  "Content-Transfer-Encoding: base64\n\nJVBERi0=\n";
  auto r = parse_mail(pdf_only);
  ASSERT_TRUE(r.message) << r.error;
  EXPECT_EQ(r.message->text, "");
  ASSERT_EQ(r.message->attachments.size(), 1u);
  EXPECT_EQ(r.message->attachments[0].media_type, "application/pdf");
  EXPECT_EQ(r.message->attachments[0].name, "scan.pdf");
  EXPECT_EQ(r.message->attachments[0].bytes, "%PDF-");
}

TEST(Mail, ASignaturePartIsNotAFile) {
  auto signed_mail = "From: a@example.org\nMIME-Version: 1.0\n"
                     "Content-Type: multipart/signed; boundary=\"s\";\n"
                     " protocol=\"application/pgp-signature\"\n\n"
                     "--s\nContent-Type: text/plain\n\nSigned words.\n"
                     "--s\nContent-Type: application/pgp-signature; "
                     "name=\"signature.asc\"\n\n"
                     "-----BEGIN PGP SIGNATURE-----\nxyz\n"
                     "-----END PGP SIGNATURE-----\n--s--\n";
  auto r = parse_mail(signed_mail);
  ASSERT_TRUE(r.message) << r.error;
  EXPECT_EQ(r.message->text, "Signed words.");
  EXPECT_TRUE(r.message->attachments.empty());
}

TEST(Mail, AnOverlongFromAddressIsAnError) {
  auto mail = "From: " + std::string(300, 'a') + "@example.org\n\nhi\n";
  EXPECT_EQ(parse_mail(mail).error,
            "the From address is longer than 256 characters");
}

TEST(Mail, ParsingOnManyThreadsAtOnceGivesTheSameResults) {
  const char* names[] = {"multipart_alternative.eml", "iso_8859_1.eml",
                         "encoded_subject_b.eml", "html_only.eml",
                         "windows_1252.eml"};
  std::vector<std::string> expected;
  for (auto n : names)
    expected.push_back(parse_ok(n).text);
  std::vector<std::string> raws;
  for (auto n : names)
    raws.push_back(fixture(n));
  std::atomic<int> mismatches{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&] {
      for (int round = 0; round < 50; ++round)
        for (size_t i = 0; i < raws.size(); ++i) {
          auto r = parse_mail(raws[i]);
          if (!r.message || r.message->text != expected[i])
            ++mismatches;
        }
    });
  for (auto& th : threads)
    th.join();
  EXPECT_EQ(mismatches.load(), 0);
}

// -- text helpers -------------------------------------------------------------

TEST(MailText, CharsetsConvertAndInvalidBytesBecomeReplacements) {
  EXPECT_EQ(charset_to_utf8("caf\xe9", "ISO-8859-1"), "caf\u00e9");
  EXPECT_EQ(charset_to_utf8("\x93x\x94", "iso-8859-1"), "\u201cx\u201d")
    << "ISO-8859-1 read as Windows-1252";
  EXPECT_EQ(charset_to_utf8("caf\xe9", "latin1"), "caf\u00e9");
  EXPECT_EQ(charset_to_utf8("\x80", "cp1252"), "\u20ac");
  EXPECT_EQ(charset_to_utf8("\xa4", "iso-8859-15"), "\u20ac");
  EXPECT_EQ(charset_to_utf8("caf\xc3\xa9", ""), "caf\u00e9");
  EXPECT_EQ(charset_to_utf8("caf\xe9", "us-ascii"), "caf\u00e9");
  EXPECT_EQ(charset_to_utf8("a\xff"
                            "b",
                            "utf-8"),
            "a\ufffd"
            "b");
  EXPECT_EQ(charset_to_utf8("caf\xe9", "x-no-such-charset"), "caf\u00e9");
  EXPECT_EQ(charset_to_utf8("\x82\xa0", "shift_jis"), "\u3042");
  EXPECT_EQ(charset_to_utf8("a\x82", "shift_jis"), "a\ufffd")
    << "a sequence cut short";
}

TEST(MailText, CleaningDropsControlsAndNormalizesLineEnds) {
  EXPECT_EQ(clean_mail_text(std::string{"a\0b\x01\tc\r\nd\re\x7f", 11}),
            "ab\tc\nd\ne");
  EXPECT_EQ(clean_mail_text("x\xc2\x85y"), "xy") << "a C1 control";
  EXPECT_EQ(clean_mail_text("\xed\xa0\x80"), "\ufffd\ufffd\ufffd")
    << "a surrogate is not UTF-8";
}

TEST(MailText, TruncationCutsAtCodePoints) {
  EXPECT_EQ(truncate_utf8("\u00e9\u00e9\u00e9", 2), "\u00e9\u00e9");
  EXPECT_EQ(truncate_utf8("abc", 3), "abc");
  EXPECT_EQ(truncate_utf8("abc", 0), "");
}

TEST(MailText, HtmlEntitiesAndBlocks) {
  EXPECT_EQ(html_to_text("<div>a</div><div>b</div>"), "a\nb");
  EXPECT_EQ(html_to_text("<p>a</p><p>b</p>"), "a\n\nb");
  EXPECT_EQ(html_to_text("a<br><br>b"), "a\n\nb");
  EXPECT_EQ(html_to_text("&#65;&#x42;&#X43;&#0;&#xD800;&#99999999;"),
            "ABC\ufffd\ufffd\ufffd");
  EXPECT_EQ(html_to_text("&amp&lt;"), "&amp<") << "no ';', no reference";
  EXPECT_EQ(html_to_text("<a href='x>y'>link</a> text"), "link text");
  EXPECT_EQ(html_to_text("<SCRIPT>x</SCRIPT>y"), "y");
  EXPECT_EQ(html_to_text("<style>unclosed"), "");
  EXPECT_EQ(html_to_text("a<!-- unclosed"), "a");
  EXPECT_EQ(html_to_text("soft&shy;hyphen"), "softhyphen");
}

// -- mail -> ingest.v1 ----------------------------------------------------

TEST(MailIngest, EnvelopePassesTheCanonicalValidatorWithEmailDedupe) {
  auto m = parse_ok("multipart_alternative.eml");
  auto rec = ingest(m);
  EXPECT_EQ(rec.context.source_channel, "email");
  EXPECT_EQ(rec.context.source_endpoint_identity, "butlers@example.net");
  EXPECT_EQ(rec.context.source_sender_identity, "alice@example.org");
  EXPECT_EQ(rec.context.source_thread_identity, "alt-1@mail.example.org");
  EXPECT_EQ(rec.dedupe_key,
            "email:19:butlers@example.net:alt-1@mail.example.org");
  EXPECT_EQ(rec.normalized_text,
            "Lunch on Friday?\n\nHi there,\n\nShall we have lunch on Friday? "
            "Caf\u00e9 at noon.\n\nAlice");
  EXPECT_EQ(pointer(rec.raw_payload, "/source/provider"), "imap");
  EXPECT_EQ(pointer(rec.raw_payload, "/event/observed_at"),
            "2024-03-01T08:30:00.000000Z");
  EXPECT_EQ(pointer(rec.raw_payload, "/payload/raw/subject"),
            "Lunch on Friday?");
  EXPECT_EQ(pointer(rec.raw_payload, "/payload/raw/to/1/address"),
            "bob@example.com");
  EXPECT_EQ(pointer(rec.raw_payload, "/payload/raw/warnings"), "<absent>");
}

TEST(MailIngest, TheThreadIsTheRootOfTheReferences) {
  auto rec = ingest(parse_ok("reply_with_references.eml"));
  EXPECT_EQ(rec.context.source_thread_identity, "root@mail.example.org");
  auto m = parse_ok("auto_replied.eml");
  EXPECT_EQ(ingest(m).context.source_thread_identity,
            "butler-reply@example.net")
    << "no References: In-Reply-To";
}

TEST(MailIngest, WithoutMessageIdTheSameFileDedupesAndAnotherDoesNot) {
  auto raw = fixture("no_message_id.eml");
  auto a = ingest(*parse_mail(raw).message);
  auto b = ingest(*parse_mail(raw).message);
  EXPECT_EQ(a.dedupe_key, b.dedupe_key);
  EXPECT_EQ(a.dedupe_key,
            "email:19:butlers@example.net:sha256:" + sha256_hex(raw));
  auto c = ingest(*parse_mail(raw + "P.S.\n").message);
  EXPECT_NE(a.dedupe_key, c.dedupe_key);
  EXPECT_EQ(a.context.source_thread_identity, "sha256:" + sha256_hex(raw));
}

TEST(MailIngest, StoredFilesAreInThePayloadAndLeftOutOnesInTheText) {
  auto m = parse_ok("base64.eml");
  mail_ingest_options opts;
  opts.mailbox = "butlers@example.net";
  opts.now_us = now_us;
  opts.attachments.push_back(
    {std::string(64, 'a'), "image/png", 8, "attachment-1"});
  opts.left_out.push_back("[notes.txt (text/plain) not taken: too big]");
  auto body = mail_to_ingest(m, opts);
  auto r = parse_ingest(body, 1 << 20, 300, now_us);
  ASSERT_TRUE(r.record) << body << "\n" << r.parse_error;
  EXPECT_EQ(pointer(body, "/payload/attachments/0/sha256"),
            std::string(64, 'a'));
  EXPECT_EQ(pointer(body, "/payload/attachments/0/media_type"), "image/png");
  EXPECT_EQ(pointer(body, "/payload/attachments/0/name"), "attachment-1");
  auto text = pointer(body, "/payload/normalized_text");
  EXPECT_EQ(text.substr(text.size() - 44),
            "\n[notes.txt (text/plain) not taken: too big]");
  EXPECT_EQ(pointer(mail_to_ingest(m, mail_ingest_options{"x@y.z",
                                                          now_us,
                                                          {},
                                                          {}}),
                    "/payload/attachments"),
            "<absent>");
}

TEST(MailIngest, TheMailboxScopesTheDedupeKey) {
  auto m = parse_ok("base64.eml");
  EXPECT_NE(ingest(m, "a@example.net").dedupe_key,
            ingest(m, "b@example.net").dedupe_key);
}

TEST(MailIngest, OverlongIdsAreHashedAndTextIsBounded) {
  mail_message m;
  m.from.address = "a@example.org";
  m.message_id = std::string(300, 'x') + "@example.org";
  m.references = {std::string(400, 'r') + "@example.org"};
  m.subject = "big";
  for (size_t i = 0; i < 70000; ++i)
    m.text += "\u00e9";
  m.content_sha256 = sha256_hex("whatever");
  auto rec = ingest(m);
  EXPECT_EQ(rec.dedupe_key,
            "email:19:butlers@example.net:sha256:" + sha256_hex(m.message_id));
  EXPECT_EQ(rec.context.source_thread_identity,
            "sha256:" + sha256_hex(m.references[0]));
  EXPECT_EQ(json::code_points(rec.normalized_text), mail_max_text);
  EXPECT_EQ(pointer(rec.raw_payload, "/payload/raw/message_id"), m.message_id)
    << "raw keeps the real id for the reply";
}

TEST(MailIngest, RawHeadersAreBoundedKeepingTheThreadRoot) {
  mail_message m;
  m.from.address = "a@example.org";
  m.message_id = "id@example.org";
  m.subject = std::string(5000, 's');
  for (int i = 0; i < 200; ++i) {
    m.references.push_back("r" + std::to_string(i) + "@x");
    m.to.push_back({"to" + std::to_string(i) + "@example.org", ""});
  }
  m.content_sha256 = sha256_hex("x");
  auto rec = ingest(m);
  auto raw = read_mail_raw(rec.raw_payload);
  ASSERT_TRUE(raw.has_value());
  EXPECT_EQ(raw->to.size(), 50u);
  EXPECT_EQ(raw->to.back().address, "to49@example.org");
  ASSERT_EQ(raw->references.size(), 50u);
  EXPECT_EQ(raw->references.front(), "r0@x");
  EXPECT_EQ(raw->references[1], "r151@x");
  EXPECT_EQ(raw->references.back(), "r199@x");
  EXPECT_EQ(raw->subject.size(), 1000u);
  EXPECT_EQ(rec.context.source_thread_identity, "r0@x");
}

TEST(MailIngest, NoUsableDateFallsBackToNow) {
  auto m = parse_ok("crlf_line_ends.eml");
  m.date.clear();
  m.date_us = 0;
  mail_ingest_options opts{"butlers@example.net", now_us, {}, {}};
  EXPECT_EQ(pointer(mail_to_ingest(m, opts), "/event/observed_at"),
            "2023-11-14T22:13:20.000000Z");
}

TEST(MailIngest, WarningsAndAutoSubmittedAreInRaw) {
  auto rec = ingest(parse_ok("truncated_multipart_with_text.eml"));
  EXPECT_EQ(pointer(rec.raw_payload, "/payload/raw/warnings"),
            R"(["truncated message"])");
  auto auto_rec = ingest(parse_ok("auto_replied.eml"));
  EXPECT_EQ(pointer(auto_rec.raw_payload, "/payload/raw/auto_submitted"),
            "auto-replied");
}

TEST(MailIngest, RawReadsBackWhatTheEnvelopeStored) {
  auto rec = ingest(parse_ok("reply_with_references.eml"));
  auto raw = read_mail_raw(rec.raw_payload);
  ASSERT_TRUE(raw.has_value());
  EXPECT_EQ(raw->message_id, "r3@mail.example.org");
  EXPECT_EQ(raw->subject, "Re: Lunch on Friday?");
  EXPECT_EQ(raw->from.address, "alice@example.org");
  EXPECT_EQ(raw->from.name, "Alice Example");
  ASSERT_EQ(raw->reply_to.size(), 1u);
  EXPECT_EQ(raw->reply_to[0].address, "alice.work@example.org");
  ASSERT_EQ(raw->to.size(), 1u);
  EXPECT_EQ(raw->in_reply_to, "r2@mail.example.org");
  EXPECT_EQ(raw->references.size(), 3u);
  EXPECT_EQ(raw->date, "2024-03-10T18:00:00+00:00");
  EXPECT_TRUE(raw->may_auto_reply());
  EXPECT_FALSE(read_mail_raw("not json").has_value());
  EXPECT_FALSE(read_mail_raw(R"({"payload":{"raw":{}}})").has_value());
  EXPECT_FALSE(read_mail_raw(R"({"payload":{"raw":{"text":"api"}}})"));
}

TEST(MailIngest, AutoSubmittedOtherThanNoForbidsAnAutomaticReply) {
  mail_raw_fields r;
  r.from.address = "a@example.org";
  EXPECT_TRUE(r.may_auto_reply());
  r.auto_submitted = "No";
  EXPECT_TRUE(r.may_auto_reply());
  r.auto_submitted = " no (a comment)";
  EXPECT_TRUE(r.may_auto_reply());
  r.auto_submitted = "auto-replied";
  EXPECT_FALSE(r.may_auto_reply());
  r.auto_submitted = "auto-generated; owner-email=x@example.org";
  EXPECT_FALSE(r.may_auto_reply());
}

// -- replies ------------------------------------------------------------------

TEST(MailReply, SubjectGetsOneRe) {
  EXPECT_EQ(reply_subject("Lunch"), "Re: Lunch");
  EXPECT_EQ(reply_subject("Re: Lunch"), "Re: Lunch");
  EXPECT_EQ(reply_subject("  RE:Lunch"), "RE:Lunch");
  EXPECT_EQ(reply_subject("re: lunch"), "re: lunch");
  EXPECT_EQ(reply_subject("Rebooking"), "Re: Rebooking");
  EXPECT_EQ(reply_subject(""), "Re: (no subject)");
}

mail_draft reply_draft() {
  mail_draft d;
  d.from = "Butlers <butlers@example.net>";
  d.to = "alice@example.org";
  d.subject = reply_subject("Lunch on Friday? \u00fcber");
  d.text = "Sure \u2014 noon it is.\n.\nA line with a dot above.\n";
  d.in_reply_to = "r3@mail.example.org";
  d.references = {"root@mail.example.org", "r2@mail.example.org"};
  d.delivery_key = "0190b7a2-0000-7000-8000-000000000001:seg-1:0";
  d.date_us = now_us;
  return d;
}

TEST(MailReply, ComposedMailHasTheThreadingHeadersAndCrLfLines) {
  std::string error;
  auto c = compose_mail(reply_draft(), &error);
  ASSERT_TRUE(c.has_value()) << error;
  EXPECT_EQ(c->envelope_from, "butlers@example.net");
  auto& t = c->rfc822;
  for (size_t i = t.find('\n'); i != std::string::npos; i = t.find('\n', i + 1))
    ASSERT_TRUE(i > 0 && t[i - 1] == '\r') << "bare LF at " << i;
  // Unfolded (RFC 5322 §2.2.3), as a reader sees the headers.
  std::string unfolded;
  for (size_t i = 0; i < t.size(); ++i) {
    if (t.compare(i, 3, "\r\n\t") == 0 || t.compare(i, 3, "\r\n ") == 0) {
      unfolded += ' ';
      i += 2;
      continue;
    }
    unfolded += t[i];
  }
  for (auto& line :
       {"From: Butlers <butlers@example.net>\r\n", "To: alice@example.org\r\n",
        "In-Reply-To: <r3@mail.example.org>\r\n",
        "References: <root@mail.example.org> "
        "<r2@mail.example.org> <r3@mail.example.org>\r\n",
        "Date: Tue, 14 Nov 2023 22:13:20 +0000\r\n",
        "Auto-Submitted: auto-replied\r\n", "MIME-Version: 1.0\r\n",
        "Content-Type: text/plain; charset=utf-8\r\n"})
    EXPECT_NE(unfolded.find(line), std::string::npos) << line << "\n" << t;
  EXPECT_NE(t.find("Message-Id: <" + c->message_id + ">\r\n"),
            std::string::npos);
  for (unsigned char ch : t)
    ASSERT_LT(ch, 0x80) << "7-bit transport";
}

TEST(MailReply, AComposedReplyParsesBackToWhatWasMeant) {
  auto d = reply_draft();
  auto c = compose_mail(d, nullptr);
  ASSERT_TRUE(c.has_value());
  auto r = parse_mail(c->rfc822);
  ASSERT_TRUE(r.message.has_value()) << r.error;
  auto& m = *r.message;
  EXPECT_EQ(m.subject, "Re: Lunch on Friday? \u00fcber");
  EXPECT_EQ(m.text, "Sure \u2014 noon it is.\n.\nA line with a dot above.");
  EXPECT_EQ(m.from.address, "butlers@example.net");
  EXPECT_EQ(m.from.name, "Butlers");
  ASSERT_EQ(m.to.size(), 1u);
  EXPECT_EQ(m.to[0].address, "alice@example.org");
  EXPECT_EQ(m.in_reply_to, "r3@mail.example.org");
  EXPECT_EQ(m.references, (std::vector<std::string>{"root@mail.example.org",
                                                    "r2@mail.example.org",
                                                    "r3@mail.example.org"}));
  EXPECT_EQ(m.message_id, c->message_id);
  EXPECT_EQ(m.date_us, now_us);
  EXPECT_EQ(m.auto_submitted, "auto-replied");
}

TEST(MailReply, TheMessageIdFollowsTheDeliveryKey) {
  auto d = reply_draft();
  auto a = compose_mail(d, nullptr);
  d.date_us += 60 * 1000000;
  auto again = compose_mail(d, nullptr);
  d.delivery_key += "x";
  auto other = compose_mail(d, nullptr);
  ASSERT_TRUE(a && again && other);
  EXPECT_EQ(a->message_id, again->message_id) << "a redelivery";
  EXPECT_NE(a->message_id, other->message_id);
  EXPECT_EQ(a->message_id,
            reply_message_id(reply_draft().delivery_key, "example.net"));
  EXPECT_NE(a->message_id.find("@example.net"), std::string::npos);
}

TEST(MailReply, ReferencesKeepTheRootAndTheNewest) {
  auto d = reply_draft();
  d.references.clear();
  for (int i = 0; i < 30; ++i)
    d.references.push_back("r" + std::to_string(i) + "@x");
  auto c = compose_mail(d, nullptr);
  ASSERT_TRUE(c.has_value());
  auto m = parse_mail(c->rfc822).message;
  ASSERT_TRUE(m.has_value());
  ASSERT_EQ(m->references.size(), mail_max_references);
  EXPECT_EQ(m->references.front(), "r0@x");
  EXPECT_EQ(m->references[1], "r12@x");
  EXPECT_EQ(m->references.back(), "r3@mail.example.org");
}

TEST(MailReply, AFirstMailHasNoThreadingHeaders) {
  auto d = reply_draft();
  d.in_reply_to.clear();
  d.references.clear();
  d.subject = "Your daily summary";
  auto c = compose_mail(d, nullptr);
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(c->rfc822.find("In-Reply-To"), std::string::npos);
  EXPECT_EQ(c->rfc822.find("References"), std::string::npos);
  EXPECT_EQ(c->rfc822.find("Auto-Submitted"), std::string::npos);
  EXPECT_NE(c->rfc822.find("Subject: Your daily summary\r\n"),
            std::string::npos);
}

TEST(MailReply, HeaderInjectionThroughTheSubjectIsImpossible) {
  auto d = reply_draft();
  d.subject = "Hi\r\nBcc: victim@example.org";
  auto c = compose_mail(d, nullptr);
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(c->rfc822.find("\r\nBcc:"), std::string::npos);
  auto m = parse_mail(c->rfc822).message;
  ASSERT_TRUE(m.has_value());
  EXPECT_EQ(m->subject, "Hi Bcc: victim@example.org");
}

TEST(MailReply, NonAddressesAreRefused) {
  auto d = reply_draft();
  d.to = "not an address";
  std::string error;
  EXPECT_FALSE(compose_mail(d, &error).has_value());
  EXPECT_EQ(error, "not a mail address (to): 'not an address'");
  d = reply_draft();
  d.from = "";
  EXPECT_FALSE(compose_mail(d, &error).has_value());
  EXPECT_EQ(error, "not a mail address (from): ''");
}

} // namespace
} // namespace butlers
