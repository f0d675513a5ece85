/* lexer.re: the tokens of a .spmd file (SPEC section 2), for re2c.
 * lex_next() returns one token with its span; lexical errors are reported
 * and skipped so the parser always sees a well-formed token stream. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "lexer.h"
#include "parser.h"

static Span tok_span(Lexer *lx) {
  return (Span){(uint32_t)lx->file, (uint32_t)(lx->tok - lx->start),
                (uint32_t)(lx->cur - lx->start)};
}

static Span span_at(Lexer *lx, const char *from, const char *to) {
  return (Span){(uint32_t)lx->file, (uint32_t)(from - lx->start), (uint32_t)(to - lx->start)};
}

/* Brackets are tracked so that a syntax error at a closer or at the end of
 * the file can name the bracket that is still open. */
static void bracket_open(Lexer *lx, char ch, bool type) {
  if (lx->nopen < MAX_BRACKETS) {
    lx->open[lx->nopen].ch = ch;
    lx->open[lx->nopen].type = type;
    lx->open[lx->nopen].span = tok_span(lx);
  }
  lx->nopen++;
}

static char closer_of(char open) { return open == '(' ? ')' : open == '[' ? ']' : '}'; }

/* A closer pops its opener together with any bracket left open inside it
 * (`{ f(1 }` closes both); a closer that matches no open bracket is
 * remembered so that the syntax error can say so.  Returns the token: the
 * '}' of axis types is TYPE_RBRACE, so that error recovery, which skips to
 * a '}', stops at the end of a block rather than inside a type. */
static int bracket_close(Lexer *lx, char ch) {
  if (lx->nopen > MAX_BRACKETS) { /* too deep to know: assume it matches */
    lx->nopen--;
    return ch;
  }
  for (int i = lx->nopen - 1; i >= 0; i--)
    if (closer_of(lx->open[i].ch) == ch) {
      if (i < lx->nopen - 1) {
        lx->skipped.ch = lx->open[lx->nopen - 1].ch;
        lx->skipped.span = lx->open[lx->nopen - 1].span;
        lx->skipped_by = tok_span(lx);
      }
      lx->nopen = i;
      return lx->open[i].type ? TYPE_RBRACE : ch;
    }
  lx->unmatched = tok_span(lx);
  return ch;
}

/* The closer for the innermost open bracket, popping it; used to close
 * brackets the user left open before a declaration. */
static int bracket_pop(Lexer *lx) {
  lx->nopen--;
  if (lx->nopen >= MAX_BRACKETS)
    return '}';
  return lx->open[lx->nopen].type ? TYPE_RBRACE : closer_of(lx->open[lx->nopen].ch);
}

/* Whether the current token starts its line, in column 1, as top-level
 * declarations do (an indented `const` is more likely a misplaced one). */
static bool at_line_start(Lexer *lx) {
  return lx->tok == lx->start || lx->tok[-1] == '\n';
}

/* A declaration keyword can only start a top-level item, so inside open
 * brackets it means that closers are missing.  The lexer reports that once,
 * here, and then hands the parser the missing closers before the keyword
 * (see `closing`), so the parser resumes at the declaration instead of
 * discarding it while it looks for a ';' or '}'. */
static int decl_keyword(Lexer *lx, int t) {
  if (lx->nopen == 0 || !at_line_start(lx))
    return t; /* elsewhere (`let fn = 1;`) the parser's message is better */
  int top = (lx->nopen < MAX_BRACKETS ? lx->nopen : MAX_BRACKETS) - 1;
  error_at(lx->c, tok_span(lx), "expected '%c' before keyword '%.*s'", closer_of(lx->open[top].ch),
           (int)(lx->cur - lx->tok), lx->tok);
  note_at(lx->c, lx->open[top].span, "to close this '%c'", lx->open[top].ch);
  lx->closing = true;
  lx->cur = lx->tok; /* read the keyword again once the brackets are closed */
  return YYerror;
}

/* The "*" "/" that ends a block comment opened before p, or NULL. */
static const char *comment_end(Lexer *lx, const char *p) {
  for (; p + 1 < lx->lim; p++)
    if (p[0] == '*' && p[1] == '/')
      return p;
  return NULL;
}

/* Skips whitespace and comments from p without reporting anything. */
static const char *skip_blank(Lexer *lx, const char *p) {
  for (;;) {
    while (p < lx->lim && (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r'))
      p++;
    if (p + 1 < lx->lim && p[0] == '/' && p[1] == '/') {
      while (p < lx->lim && *p != '\n')
        p++;
    } else if (p + 1 < lx->lim && p[0] == '/' && p[1] == '*') {
      const char *end = comment_end(lx, p + 2);
      p = end ? end + 2 : lx->lim;
    } else {
      return p;
    }
  }
}

static bool is_ident_char(char ch) {
  return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
         ch == '_';
}

/* Whether p starts one of the type letters R I V P S as a whole word. */
static bool is_type_letter(Lexer *lx, const char *p) {
  return p < lx->lim && *p && strchr("RIVPS", *p) && !(p + 1 < lx->lim && is_ident_char(p[1]));
}

/* A '{' opens the axis entries of a type when it is followed by `name :` or
 * `* :`; no statement can start that way, so the parser needs no second
 * token of lookahead to tell `-> f32[4] {tp: R} {` from `-> f32[4] {`.
 * `{:` and `{tp R,` or `{tp R}` (a missing ':') cannot start a block
 * either, so they are taken as entries too, for a message about the ':'. */
static bool opens_entries(Lexer *lx) {
  const char *p = skip_blank(lx, lx->cur);
  if (p < lx->lim && *p == ':')
    return true;
  if (p < lx->lim && *p == '*') {
    p++;
  } else {
    const char *q = p;
    while (p < lx->lim && is_ident_char(*p))
      p++;
    if (p == q)
      return false;
  }
  p = skip_blank(lx, p);
  if (p < lx->lim && *p == ':')
    return true;
  if (!is_type_letter(lx, p))
    return false;
  p = skip_blank(lx, p + 1);
  return p < lx->lim && (*p == ',' || *p == '}');
}

static int lex_string(Lexer *lx, YYSTYPE *lval) {
  Compiler *c = lx->c;
  StrBuf sb;
  sb_init(&sb, &c->arena);
  const char *p = lx->tok + 1;
  for (;;) {
    if (p >= lx->lim || *p == '\n') {
      lx->cur = p;
      error_at(c, span_at(lx, lx->tok, lx->tok + 1), "missing closing '\"' of this string");
      help(c, "a string ends on the line where it starts; write a line break as \\n");
      return YYerror; /* the parser recovers without a second message */
    }
    if (*p == '"') {
      lx->cur = p + 1;
      break;
    }
    if (*p != '\\') {
      sb_putc(&sb, *p++);
      continue;
    }
    char esc = p + 1 < lx->lim ? p[1] : '\0';
    switch (esc) {
    case 'n': sb_putc(&sb, '\n'); break;
    case 't': sb_putc(&sb, '\t'); break;
    case '\\': sb_putc(&sb, '\\'); break;
    case '"': sb_putc(&sb, '"'); break;
    default:
      error_at(c, span_at(lx, p, p + (p + 1 < lx->lim ? 2 : 1)),
               "unknown escape sequence in string");
      help(c, "the escapes are \\\" \\\\ \\n and \\t");
      if (esc == '\n' || esc == '\0') {
        p++;
        continue;
      }
    }
    p += 2;
  }
  lval->str.s = sb.data;
  lval->str.len = sb.len;
  return STRING;
}

static int lex_int(Lexer *lx, YYSTYPE *lval) {
  errno = 0;
  char *end;
  long long v = strtoll(lx->tok, &end, 10);
  if (errno == ERANGE || v > (1LL << 53)) {
    error_at(lx->c, tok_span(lx), "integer literal is too large");
    help(lx->c, "integers in .spmd files are at most 2^53 (9007199254740992)");
    v = 0;
  }
  lval->ival = v;
  return INT;
}

/* Another library's dtype written as a type here, `u16[4]`: an identifier
 * of that list right before '['. It is reported and read as f32, so that
 * the parse goes on (the program is rejected). */
static bool foreign_dtype(Lexer *lx) {
  static const char *const names[] = {"u8", "u16", "u32", "u64", "i8", "i16", "i64", "f8", "f16",
                                      "fp8", "fp16", "fp32", "fp64", "bool", "float16", "float32",
                                      "float64", "bfloat16", "int8", "int16", "int32", "int64",
                                      "uint8", "uint16", "uint32", "uint64", "c64", "c128",
                                      "complex64", "complex128"};
  size_t n = (size_t)(lx->cur - lx->tok);
  if (lx->cur >= lx->lim || *lx->cur != '[')
    return false;
  for (size_t i = 0; i < sizeof names / sizeof *names; i++)
    if (strlen(names[i]) == n && memcmp(names[i], lx->tok, n) == 0) {
      error_at(lx->c, tok_span(lx), "unknown dtype '%.*s'", (int)n, lx->tok);
      help(lx->c, "the dtypes are f32, f64, i32 and bf16%s", lx->tok[0] == 'i' || lx->tok[0] == 'u' ||
                  lx->tok[0] == 'b' ? " (ids and integers are i32)" : "");
      return true;
    }
  return false;
}

static int lex_float(Lexer *lx, YYSTYPE *lval) {
  errno = 0;
  double v = strtod(lx->tok, NULL);
  if (errno == ERANGE && (v > 1.0 || v < -1.0)) {
    error_at(lx->c, tok_span(lx), "number literal is too large for f64");
    v = 0;
  }
  lval->fval = v;
  return FLOAT;
}

/* The length of the UTF-8 character at p (2 to 4 bytes), or 0. */
static int utf8_len(Lexer *lx, const char *p, unsigned *code) {
  unsigned char ch = (unsigned char)*p;
  int n = ch >= 0xf0 && ch < 0xf5 ? 4 : ch >= 0xe0 ? 3 : ch >= 0xc2 && ch < 0xe0 ? 2 : 0;
  if (n == 0 || lx->lim - p < n)
    return 0;
  *code = ch & (0x7f >> n);
  for (int i = 1; i < n; i++) {
    if (((unsigned char)p[i] & 0xc0) != 0x80)
      return 0;
    *code = (*code << 6) | ((unsigned char)p[i] & 0x3f);
  }
  return n;
}

static bool is_binary(unsigned char ch) {
  return ch >= 0x80 || ch == 0x7f || (ch < 0x20 && ch != '\t' && ch != '\n' && ch != '\r');
}

/* A character that cannot start a token.  A UTF-8 character is consumed
 * whole and a run of other non-text bytes as one, so that a binary file
 * gives a few errors rather than one per byte.  Returns YYerror: the parser
 * then recovers without reporting the same place again. */
static int bad_char(Lexer *lx) {
  Compiler *c = lx->c;
  unsigned char ch = (unsigned char)lx->tok[0];
  unsigned code;
  int n;
  if (!is_binary(ch)) {
    error_at(c, tok_span(lx), "unexpected character '%c'", ch);
    if (ch == '\'')
      help(c, "strings are written in double quotes: \"...\"");
  } else if ((n = utf8_len(lx, lx->tok, &code)) > 0) {
    lx->cur = lx->tok + n;
    error_at(c, tok_span(lx), "unexpected character U+%04X; outside strings and comments, .spmd text is ASCII",
             code);
  } else {
    while (lx->cur < lx->lim && is_binary((unsigned char)*lx->cur) &&
           !utf8_len(lx, lx->cur, &code))
      lx->cur++;
    error_at(c, tok_span(lx), "unexpected byte 0x%02x (is this a .spmd text file?)", ch);
  }
  return YYerror;
}

/*!re2c
  re2c:define:YYCTYPE = char;
  re2c:define:YYCURSOR = lx->cur;
  re2c:define:YYLIMIT = lx->lim;
  re2c:define:YYMARKER = marker;
  re2c:yyfill:enable = 0;
  re2c:eof = 0;

  digit = [0-9];
  ident = [A-Za-z_][A-Za-z0-9_]*;
  exp   = [eE] [+-]? digit+;
*/

int yylex(YYSTYPE *lval, Span *lloc, Lexer *lx) {
  const char *marker = lx->cur;
  for (;;) {
    lx->tok = lx->cur;
    int t = -1;
    if (lx->closing && lx->nopen > 0) {
      t = bracket_pop(lx);
      goto done;
    }
    lx->closing = false;
    /*!re2c
      $                 { t = YYEOF; goto done; }
      [ \t\r\n]+        { continue; }
      "//" [^\n]*       { continue; }
      "/*"              {
                          const char *end = comment_end(lx, lx->cur);
                          if (!end) {
                            error_at(lx->c, tok_span(lx), "this comment is never closed");
                            help(lx->c, "end it with */");
                            lx->cur = lx->lim;
                            t = YYerror;
                            goto done;
                          } else {
                            lx->cur = end + 2;
                          }
                          continue;
                        }

      "mesh"      { t = decl_keyword(lx, MESH); goto done; }
      "const"     { t = decl_keyword(lx, CONST); goto done; }
      "fn"        { t = decl_keyword(lx, FN); goto done; }
      "local"     { t = decl_keyword(lx, LOCAL); goto done; }
      "export"    { t = decl_keyword(lx, EXPORT); goto done; }
      "let"       { t = LET; goto done; }
      "var"       { t = VAR; goto done; }
      "return"    { t = RETURN; goto done; }
      "for"       { t = FOR; goto done; }
      "in"        { t = IN; goto done; }
      "if"        { t = IF; goto done; }
      "else"      { t = ELSE; goto done; }
      "import"    { t = decl_keyword(lx, IMPORT); goto done; }
      "axis"      { t = AXIS; goto done; }
      "local_map" { t = LOCAL_MAP; goto done; }
      "over"      { t = OVER; goto done; }
      "struct"    { t = decl_keyword(lx, STRUCT); goto done; }
      "true"      { lval->ival = 1; t = TRUE; goto done; }
      "false"     { lval->ival = 0; t = FALSE; goto done; }
      "f32"       { lval->dtype = DT_F32; t = DTYPE; goto done; }
      "f64"       { lval->dtype = DT_F64; t = DTYPE; goto done; }
      "i32"       { lval->dtype = DT_I32; t = DTYPE; goto done; }
      "bf16"      { lval->dtype = DT_BF16; t = DTYPE; goto done; }
      "R"         { lval->ltype = LT_R; t = LTYPE; goto done; }
      "I"         { lval->ltype = LT_I; t = LTYPE; goto done; }
      "V"         { lval->ltype = LT_V; t = LTYPE; goto done; }
      "P"         { lval->ltype = LT_P; t = LTYPE; goto done; }
      "S"         { t = SHARD; goto done; }
      ident       { if (foreign_dtype(lx)) { lval->dtype = DT_F32; t = DTYPE; goto done; }
                    lval->name = intern(lx->c, lx->tok, (size_t)(lx->cur - lx->tok)); t = IDENT; goto done; }

      digit+                                      { t = lex_int(lx, lval); goto done; }
      digit+ "." digit+ exp? | digit+ exp         { t = lex_float(lx, lval); goto done; }
      digit+ "." digit+ exp? ident | digit+ ident {
                                                    error_at(lx->c, tok_span(lx), "invalid number '%.*s'",
                                                             (int)(lx->cur - lx->tok), lx->tok);
                                                    t = YYerror; goto done;
                                                  }
      digit+ "."  {
                    if (*lx->cur == '.') { /* `0..4`: the '.' belongs to '..' */
                      lx->cur--;
                      t = lex_int(lx, lval);
                      goto done;
                    }
                    error_at(lx->c, tok_span(lx), "a number cannot end with '.'; write %.*s0",
                             (int)(lx->cur - lx->tok), lx->tok);
                    lval->fval = 0; t = FLOAT; goto done;
                  }
      "." digit+ exp? {
                    char before = lx->tok > lx->start ? lx->tok[-1] : ' ';
                    if (is_ident_char(before) || before == ')' || before == ']') {
                      lx->cur = lx->tok + 1; /* `x.1`: a '.' then a number */
                      t = '.';
                      goto done;
                    }
                    error_at(lx->c, tok_span(lx), "a number must start with a digit; write 0%.*s",
                             (int)(lx->cur - lx->tok), lx->tok);
                    lval->fval = 0; t = FLOAT; goto done;
                  }
      ["]         { t = lex_string(lx, lval); goto done; }
      ['] [^'\n]* ['] {
                    error_at(lx->c, tok_span(lx), "strings are written in double quotes: \"%.*s\"",
                             (int)(lx->cur - lx->tok - 2), lx->tok + 1);
                    t = YYerror; goto done;
                  }

      "=="  { t = EQ; goto done; }
      "!="  { t = NE; goto done; }
      "<="  { t = LE; goto done; }
      ">="  { t = GE; goto done; }
      "&&"  { t = ANDAND; goto done; }
      "||"  { t = OROR; goto done; }
      "->"  { t = ARROW; goto done; }
      ".."  { t = DOTDOT; goto done; }
      "{"   { t = opens_entries(lx) ? TYPE_LBRACE : '{'; bracket_open(lx, '{', t == TYPE_LBRACE); goto done; }
      "(" | "["  { bracket_open(lx, lx->tok[0], false); t = lx->tok[0]; goto done; }
      ")" | "]" | "}"  { t = bracket_close(lx, lx->tok[0]); goto done; }
      [,;:=+\-*/%@<>!.] { t = lx->tok[0]; goto done; }

      *     { t = bad_char(lx); goto done; }
    */
  done:
    *lloc = tok_span(lx);
    lx->prev = lx->last;
    lx->last = *lloc;
    return t;
  }
}
