/* parser.y: the grammar of .spmd files (SPEC sections 2-4, 6-11), for Bison.
 * A pure, reentrant LALR(1) parser with locations.  Actions only build AST
 * nodes; every semantic rule lives in a later phase.  Syntax errors are
 * reported in words (yyreport_syntax_error below) and the parser recovers at
 * `;`, `}` and declaration boundaries so that one run reports them all. */

%define api.pure full
%define api.location.type {Span}
%define parse.error custom
%define parse.lac full
%locations
%expect 0
%param {Lexer *lx}

%code requires {
#include "lexer.h"

#define YYLLOC_DEFAULT(Cur, Rhs, N)                                            \
  do {                                                                         \
    if (N) {                                                                   \
      int first_ = 1; /* an empty leading part (fn_flags) has no extent */     \
      while (first_ < (N) && YYRHSLOC(Rhs, first_).begin == YYRHSLOC(Rhs, first_).end) \
        first_++;                                                              \
      (Cur) = YYRHSLOC(Rhs, first_);                                           \
      (Cur).end = YYRHSLOC(Rhs, N).end;                                        \
    } else {                                                                   \
      (Cur) = YYRHSLOC(Rhs, 0);                                                \
      (Cur).begin = (Cur).end;                                                 \
    }                                                                          \
  } while (0)

/* Lists under construction: head and tail, so appending is O(1). */
#define LIST_TYPE(T) struct { T *head, *tail; }
}

%union {
  long long ival;
  double fval;
  struct { const char *s; size_t len; } str;
  Name name;
  DType dtype;
  LTypeKind ltype;
  LType lt;
  int flags;
  Expr *expr;
  Arg *arg;
  Stmt *stmt;
  TypeExpr *type;
  struct { TypeExpr *t; bool tuple; } ret;
  Dim *dim;
  AxisRef *axis;
  AxisEntry *entry;
  Param *param;
  Binding *bind;
  MeshAxisDecl *maxis;
  StructField *field;
  LIST_TYPE(Expr) exprs;
  LIST_TYPE(Arg) args;
  LIST_TYPE(Stmt) stmts;
  LIST_TYPE(TypeExpr) types;
  LIST_TYPE(Dim) dims;
  LIST_TYPE(AxisRef) axes;
  LIST_TYPE(AxisEntry) entries;
  LIST_TYPE(Param) params;
  LIST_TYPE(Binding) binds;
  LIST_TYPE(MeshAxisDecl) maxes;
  LIST_TYPE(StructField) fields;
}

%code {
#include <string.h>

int yylex(YYSTYPE *lval, Span *lloc, Lexer *lx);

static void yyerror(Span *loc, Lexer *lx, const char *msg);

#define LIST_EMPTY(l) ((l).head = (l).tail = NULL)
#define LIST_ONE(l, n) ((l).head = (l).tail = (n))
/* dst = src + n; n may be NULL (a statement that failed to parse). */
#define LIST_ADD(dst, src, n)                                                  \
  do {                                                                         \
    (dst) = (src);                                                             \
    if (!(n))                                                                  \
      break;                                                                   \
    if ((dst).tail)                                                            \
      (dst).tail = (dst).tail->next = (n);                                     \
    else                                                                       \
      (dst).head = (dst).tail = (n);                                           \
  } while (0)

#define C (lx->c)
#define NEW(T) ((T *)arena_alloc(&C->arena, sizeof(T)))

static void add_item(Lexer *lx, Item *it);
static void forget_brackets(Lexer *lx, Span skipped);
static Name reserved_name(Lexer *lx, Span sp);
static Item *new_item(Lexer *lx, ItemKind kind, Span sp);
static Stmt *new_stmt(Lexer *lx, StmtKind kind, Span sp);
static AxisRef *new_axis(Lexer *lx, Name name, Span sp);
static Binding *new_binding(Lexer *lx, Name name, Span sp);
static Expr *new_call(Lexer *lx, Expr *callee, Arg *args, Span sp);
static Expr *new_postfix(Lexer *lx, ExprKind kind, Expr *lhs, Expr *rhs, Span sp);
static Expr *new_seq(Lexer *lx, ExprKind kind, Expr *elems, Span sp);
}

%token <ival> INT "integer" TRUE "true" FALSE "false"
%token <fval> FLOAT "number"
%token <str> STRING "string"
%token <name> IDENT "identifier"
%token <dtype> DTYPE "dtype"
%token <ltype> LTYPE "type letter"
%token SHARD "S"
%token MESH "mesh" CONST "const" FN "fn" LOCAL "local" EXPORT "export"
%token LET "let" VAR "var" RETURN "return" FOR "for" IN "in" IF "if"
%token ELSE "else" IMPORT "import" AXIS "axis" LOCAL_MAP "local_map"
%token OVER "over" STRUCT "struct"
%token EQ "==" NE "!=" LE "<=" GE ">=" ANDAND "&&" OROR "||"
%token ARROW "->" DOTDOT ".."
%token TYPE_LBRACE "{ (of axis types)" TYPE_RBRACE "} (of axis types)"

%type <expr> expr postfix primary size ltype_expr local_map arg_value
%type <exprs> expr_list expr_list_opt
%type <arg> arg
%type <args> args args_opt
%type <stmt> stmt block if_stmt
%type <stmts> stmts
%type <type> type any_type
%type <field> field
%type <fields> fields fields_opt
%type <ret> fn_ret
%type <types> type_list
%type <dim> dim
%type <dims> dims dims_opt
%type <axis> axis_name
%type <axes> axis_names axis_group over_opt lm_vars
%type <axis> lm_var
%type <type> lm_ret
%type <entry> entry
%type <entries> entries entries_opt
%type <lt> ltype
%type <param> param
%type <params> params params_opt
%type <bind> binding
%type <name> name
%type <binds> bindings assign_targets
%type <maxis> mesh_axis
%type <maxes> mesh_axes
%type <flags> fn_flags

%left OROR
%left ANDAND
%left EQ NE
%left '<' '>' LE GE
%left '+' '-'
%left '*' '/' '%' '@'
%precedence UNARY

%%

/* program: item* */
program
  : %empty
  | program item
  ;

/* item: import | mesh | const | struct | fn */
item
  : IMPORT name ';'                    { Item *it = new_item(lx, IT_IMPORT, @$); it->name = $2; it->name_span = @2; add_item(lx, it); }
  | MESH '(' mesh_axes ')' ';'         { Item *it = new_item(lx, IT_MESH, @$); it->axes = $3.head; add_item(lx, it); }
  | CONST name '=' expr ';'            { Item *it = new_item(lx, IT_CONST, @$); it->name = $2; it->name_span = @2; it->value = $4; add_item(lx, it); }
  | STRUCT name fields_opt
      {
        Item *it = new_item(lx, IT_STRUCT, @$);
        StructDecl *st = it->st = NEW(StructDecl);
        st->span = @$; st->name = $2; st->name_span = @2; st->fields = $3.head;
        for (StructField *f = st->fields; f; f = f->next)
          st->nfields++;
        add_item(lx, it);
      }
  | fn_flags FN name '(' params_opt ')' fn_ret block
      {
        Item *it = new_item(lx, IT_FN, @$);
        FnDecl *fn = it->fn = NEW(FnDecl);
        fn->span = span_join(@$, @7); fn->span.end = @7.end > @6.end ? @7.end : @6.end; fn->name = $3; fn->name_span = @3; fn->flags = $1;
        fn->params = $5.head; fn->ret = $7.t; fn->ret_tuple = $7.tuple; fn->body = $8;
        add_item(lx, it);
      }
  /* Recovery: skip to the end of the broken declaration.  A block after
   * the error (the body of a function whose signature is broken) is parsed,
   * so errors inside it are still found; a declaration keyword ends the
   * error without being skipped. */
  | error ';'          { forget_brackets(lx, @1); yyerrok; }
  | error '}'          { forget_brackets(lx, @1); yyerrok; }
  | error block        { forget_brackets(lx, @1); yyerrok; }
  | error              { forget_brackets(lx, @1); }
  ;

fn_flags
  : %empty        { $$ = 0; }
  | LOCAL         { $$ = FN_LOCAL; }
  | EXPORT        { $$ = FN_EXPORT; }
  | EXPORT LOCAL  { $$ = FN_EXPORT | FN_LOCAL; }
  ;

/* fields: '{' [field (',' field)* [',']] '}' -- the lexer reads the '{'
 * before `name :` as the brace of axis types, which this accepts too */
fields_opt
  : '{' '}'                              { LIST_EMPTY($$); }
  | TYPE_LBRACE fields TYPE_RBRACE       { $$ = $2; }
  | TYPE_LBRACE fields ',' TYPE_RBRACE   { $$ = $2; }
  | '{' fields '}'                       { $$ = $2; } /* (only with a syntax error in the first field) */
  | '{' fields ',' '}'                   { $$ = $2; }
  ;
fields
  : field              { LIST_ONE($$, $1); }
  | fields ',' field   { LIST_ADD($$, $1, $3); }
  ;
/* field: name ':' any_type */
field
  : name ':' any_type  { $$ = NEW(StructField); $$->span = @$; $$->name = $1; $$->name_span = @1; $$->type = $3; }
  ;

/* mesh_axis: name [':' size] */
mesh_axes
  : mesh_axis                  { LIST_ONE($$, $1); }
  | mesh_axes ',' mesh_axis    { LIST_ADD($$, $1, $3); }
  ;
mesh_axis
  : name            { $$ = NEW(MeshAxisDecl); $$->span = @$; $$->name = $1; }
  | name ':' expr   { $$ = NEW(MeshAxisDecl); $$->span = @$; $$->name = $1; $$->size = $3; }
  ;

params_opt
  : %empty        { LIST_EMPTY($$); }
  | params        { $$ = $1; }
  | params ','    { $$ = $1; }
  ;
params
  : param              { LIST_ONE($$, $1); }
  | params ',' param   { LIST_ADD($$, $1, $3); }
  ;
/* param: name [':' any_type] | name ':' 'axis' */
param
  : name ':' any_type { $$ = NEW(Param); $$->span = @$; $$->name = new_binding(lx, $1, @1); $$->type = $3; }
  | name              { $$ = NEW(Param); $$->span = @$; $$->name = new_binding(lx, $1, @1); }
  | name ':' AXIS
      {
        $$ = NEW(Param); $$->span = @$; $$->name = new_binding(lx, $1, @1);
        $$->type = NEW(TypeExpr); $$->type->span = @3; $$->type->is_axis = true;
      }
  ;

/* fn_ret: ['->' any_type | '->' '(' any_type, ... ')'] */
fn_ret
  : %empty                  { $$.t = NULL; $$.tuple = false; }
  | ARROW any_type          { $$.t = $2; $$.tuple = false; }
  | ARROW '(' type_list ')' { $$.t = $3.head; $$.tuple = true; }
  ;
type_list
  : any_type                { LIST_ONE($$, $1); }
  | type_list ',' any_type  { LIST_ADD($$, $1, $3); }
  ;

/* any_type: type | struct_name | module '.' struct_name */
any_type
  : type
  | IDENT             { $$ = NEW(TypeExpr); $$->span = @$; $$->struct_name = $1; }
  | IDENT '.' IDENT   { $$ = NEW(TypeExpr); $$->span = @$; $$->struct_module = $1; $$->struct_name = $3; }
  ;

/* type: dtype ['[' dim, ... ']'] ['{' entry, ... '}'] */
type
  : DTYPE dims_opt entries_opt
      {
        $$ = NEW(TypeExpr); $$->span = @$; $$->dtype = $1;
        $$->has_dims = @2.end > @2.begin; $$->dims = $2.head; $$->entries = $3.head;
      }
  ;
dims_opt
  : %empty             { LIST_EMPTY($$); }
  | '[' ']'            { LIST_EMPTY($$); }
  | '[' dims ']'       { $$ = $2; }
  | '[' dims ',' ']'   { $$ = $2; }
  ;
dims
  : dim             { LIST_ONE($$, $1); }
  | dims ',' dim    { LIST_ADD($$, $1, $3); }
  ;
/* dim: size ['@' axes] | '..' name */
dim
  : size                    { $$ = NEW(Dim); $$->span = @$; $$->size = $1; }
  | size '@' axis_group     { $$ = NEW(Dim); $$->span = @$; $$->size = $1; $$->axes = $3.head; }
  | DOTDOT IDENT
      {
        $$ = NEW(Dim); $$->span = @$; $$->rest = true;
        $$->size = ast_expr(C, EX_NAME, @2); $$->size->name = $2;
      }
  ;
/* size: int | name | size '*' size | size '/' size | size '+' size | size '-' size | '(' size ')' */
size
  : INT              { $$ = ast_expr(C, EX_INT, @$); $$->ival = $1; }
  | IDENT            { $$ = ast_expr(C, EX_NAME, @$); $$->name = $1; }
  | size '*' size    { $$ = ast_binary(C, OP_MUL, $1, $3, @$); }
  | size '/' size    { $$ = ast_binary(C, OP_DIV, $1, $3, @$); }
  | size '+' size    { $$ = ast_binary(C, OP_ADD, $1, $3, @$); }
  | size '-' size    { $$ = ast_binary(C, OP_SUB, $1, $3, @$); }
  | '(' size ')'     { $$ = $2; $$->span = @$; }
  ;
axis_group
  : axis_name                   { LIST_ONE($$, $1); }
  | '(' axis_names ')'          { $$ = $2; }
  ;
axis_names
  : axis_name                   { LIST_ONE($$, $1); }
  | axis_names ',' axis_name    { LIST_ADD($$, $1, $3); }
  ;
axis_name
  : IDENT                       { $$ = new_axis(lx, $1, @1); }
  ;
entries_opt
  : %empty                          { LIST_EMPTY($$); }
  | TYPE_LBRACE entries TYPE_RBRACE      { $$ = $2; }
  | TYPE_LBRACE entries ',' TYPE_RBRACE  { $$ = $2; }
  ;
entries
  : entry                  { LIST_ONE($$, $1); }
  | entries ',' entry      { LIST_ADD($$, $1, $3); }
  ;
/* entry: axis ':' ltype | '*' ':' ltype */
entry
  : IDENT ':' ltype   { $$ = NEW(AxisEntry); $$->span = @$; $$->axis = new_axis(lx, $1, @1); $$->lt = $3; }
  | '*' ':' ltype     { $$ = NEW(AxisEntry); $$->span = @$; $$->lt = $3; }
  ;
/* ltype: R | I | V | P | S '(' int ')' */
ltype
  : LTYPE                    { $$ = (LType){$1, 0}; }
  | SHARD '(' INT ')'        { $$ = (LType){LT_S, (int)($3 > 1000 ? 1000 : $3)}; }
  | SHARD '(' '-' INT ')'    { $$ = (LType){LT_S, (int)($4 > 1000 ? -1000 : -$4)}; }
  ;

/* block: '{' stmt* '}' */
block
  : '{' stmts '}'          { $$ = new_stmt(lx, ST_BLOCK, @$); $$->body = $2.head; }
  | '{' stmts error '}'    { $$ = new_stmt(lx, ST_BLOCK, @$); $$->body = $2.head; yyerrok; }
  ;
stmts
  : %empty           { LIST_EMPTY($$); }
  | stmts stmt       { LIST_ADD($$, $1, $2); }
  ;

stmt
  : LET bindings '=' expr ';'
      { $$ = new_stmt(lx, ST_LET, @$); $$->targets = $2.head; $$->value = $4; }
  | LET binding ':' any_type '=' expr ';'
      { $$ = new_stmt(lx, ST_LET, @$); $$->targets = $2; $$->type = $4; $$->value = $6; }
  | VAR binding '=' expr ';'
      { $$ = new_stmt(lx, ST_VAR, @$); $$->targets = $2; $$->value = $4; }
  | VAR binding ':' any_type '=' expr ';'
      { $$ = new_stmt(lx, ST_VAR, @$); $$->targets = $2; $$->type = $4; $$->value = $6; }
  | IDENT '=' expr ';'
      { $$ = new_stmt(lx, ST_ASSIGN, @$); $$->targets = new_binding(lx, $1, @1); $$->value = $3; }
  | IDENT ',' assign_targets '=' expr ';'
      {
        $$ = new_stmt(lx, ST_ASSIGN, @$); $$->targets = new_binding(lx, $1, @1);
        $$->targets->next = $3.head; $$->value = $5;
      }
  | RETURN ';'
      { $$ = new_stmt(lx, ST_RETURN, @$); }
  | RETURN expr_list ';'
      { $$ = new_stmt(lx, ST_RETURN, @$); $$->value = $2.head; }
  | FOR binding IN expr DOTDOT expr block
      { $$ = new_stmt(lx, ST_FOR, @$); $$->targets = $2; $$->lo = $4; $$->hi = $6; $$->then = $7; }
  | if_stmt
  | expr ';'
      { $$ = new_stmt(lx, ST_EXPR, @$); $$->value = $1; }
  | error ';'
      { $$ = NULL; forget_brackets(lx, @1); yyerrok; }
  | error block
      { $$ = NULL; forget_brackets(lx, @1); yyerrok; }
  | error block ';'
      { $$ = NULL; forget_brackets(lx, @1); yyerrok; }
  ;
if_stmt
  : IF expr block                  { $$ = new_stmt(lx, ST_IF, @$); $$->cond = $2; $$->then = $3; }
  | IF expr block ELSE block       { $$ = new_stmt(lx, ST_IF, @$); $$->cond = $2; $$->then = $3; $$->els = $5; }
  | IF expr block ELSE if_stmt     { $$ = new_stmt(lx, ST_IF, @$); $$->cond = $2; $$->then = $3; $$->els = $5; }
  ;
/* the variables of `a, b = e;` after the first */
assign_targets
  : IDENT                      { LIST_ONE($$, new_binding(lx, $1, @1)); }
  | assign_targets ',' IDENT   { LIST_ADD($$, $1, new_binding(lx, $3, @3)); }
  ;
bindings
  : binding                  { LIST_ONE($$, $1); }
  | bindings ',' binding     { LIST_ADD($$, $1, $3); }
  ;
binding
  : name                     { $$ = new_binding(lx, $1, @1); }
  ;
/* name: a new name being declared.  A reserved word there is reported by
 * this rule, so the parser goes on as if it were a name. */
name
  : IDENT
  | reserved                 { $$ = reserved_name(lx, @1); }
  ;
reserved
  : MESH | CONST | FN | LOCAL | EXPORT | LET | VAR | RETURN | FOR | IN | IF | ELSE
  | IMPORT | AXIS | LOCAL_MAP | OVER | STRUCT | TRUE | FALSE | DTYPE | LTYPE | SHARD
  ;

expr
  : expr OROR expr      { $$ = ast_binary(C, OP_OR, $1, $3, @$); }
  | expr ANDAND expr    { $$ = ast_binary(C, OP_AND, $1, $3, @$); }
  | expr EQ expr        { $$ = ast_binary(C, OP_EQ, $1, $3, @$); }
  | expr NE expr        { $$ = ast_binary(C, OP_NE, $1, $3, @$); }
  | expr '<' expr       { $$ = ast_binary(C, OP_LT, $1, $3, @$); }
  | expr LE expr        { $$ = ast_binary(C, OP_LE, $1, $3, @$); }
  | expr '>' expr       { $$ = ast_binary(C, OP_GT, $1, $3, @$); }
  | expr GE expr        { $$ = ast_binary(C, OP_GE, $1, $3, @$); }
  | expr '+' expr       { $$ = ast_binary(C, OP_ADD, $1, $3, @$); }
  | expr '-' expr       { $$ = ast_binary(C, OP_SUB, $1, $3, @$); }
  | expr '*' expr       { $$ = ast_binary(C, OP_MUL, $1, $3, @$); }
  | expr '/' expr       { $$ = ast_binary(C, OP_DIV, $1, $3, @$); }
  | expr '%' expr       { $$ = ast_binary(C, OP_MOD, $1, $3, @$); }
  | expr '@' expr       { $$ = ast_binary(C, OP_MATMUL, $1, $3, @$); }
  | '-' expr %prec UNARY  { $$ = ast_unary(C, OP_NEG, $2, @$); }
  | '!' expr %prec UNARY  { $$ = ast_unary(C, OP_NOT, $2, @$); }
  | postfix
  | type                { $$ = ast_expr(C, EX_TYPE, @$); $$->type = $1; }
  ;
postfix
  : primary
  | postfix '(' args_opt ')'    { $$ = new_call(lx, $1, $3.head, @$); }
  | postfix '[' expr ']'        { $$ = new_postfix(lx, EX_INDEX, $1, $3, @$); }
  | postfix '.' IDENT           { $$ = new_postfix(lx, EX_FIELD, $1, NULL, @$); $$->name = $3; }
  ;
primary
  : INT                 { $$ = ast_expr(C, EX_INT, @$); $$->ival = $1; }
  | FLOAT               { $$ = ast_expr(C, EX_FLOAT, @$); $$->fval = $1; }
  | STRING              { $$ = ast_expr(C, EX_STRING, @$); $$->str = $1.s; $$->slen = $1.len; }
  | TRUE                { $$ = ast_expr(C, EX_BOOL, @$); $$->ival = 1; }
  | FALSE               { $$ = ast_expr(C, EX_BOOL, @$); $$->ival = 0; }
  | IDENT               { $$ = ast_expr(C, EX_NAME, @$); $$->name = $1; }
  | ltype_expr
  | '(' expr ')'                          { $$ = $2; }
  | '(' ')'                               { $$ = new_seq(lx, EX_TUPLE, NULL, @$); }
  | '(' expr ',' expr_list_opt ')'        { $2->next = $4.head; $$ = new_seq(lx, EX_TUPLE, $2, @$); }
  | '[' expr_list_opt ']'                 { $$ = new_seq(lx, EX_LIST, $2.head, @$); }
  | local_map
  ;
/* The letters R I V P and S(dim) as values, for src=, dst= and the like. */
ltype_expr
  : LTYPE                 { $$ = ast_expr(C, EX_LTYPE, @$); $$->lt.kind = $1; }
  | SHARD '(' expr ')'    { $$ = ast_expr(C, EX_LTYPE, @$); $$->lt.kind = LT_S; $$->lhs = $3; $$->depth = $3->depth + 1; }
  ;
/* local_map: 'local_map' '(' name [':' type], ... ')' ['over' axes] ['->' type] block
 * (`x: T` redistributes x to T before the block, `-> T` is the global type of
 * the block's result, redistributed to the binding's declared type after it) */
local_map
  : LOCAL_MAP '(' lm_vars ')' over_opt lm_ret block
      {
        $$ = ast_expr(C, EX_LOCAL_MAP, @$); $$->lm_vars = $3.head;
        $$->lm_over = $5.head; $$->lm_has_over = @5.end > @5.begin; $$->lm_ret = $6; $$->body = $7;
      }
  ;
lm_vars
  : lm_var                { LIST_ONE($$, $1); }
  | lm_vars ',' lm_var    { LIST_ADD($$, $1, $3); }
  ;
lm_var
  : IDENT                 { $$ = new_axis(lx, $1, @1); }
  | IDENT ':' type        { $$ = new_axis(lx, $1, @1); $$->type = $3; }
  ;
lm_ret
  : %empty                { $$ = NULL; }
  | ARROW type            { $$ = $2; }
  ;
over_opt
  : %empty                  { LIST_EMPTY($$); }
  | OVER axis_group         { $$ = $2; }
  ;
expr_list_opt
  : %empty                  { LIST_EMPTY($$); }
  | expr_list               { $$ = $1; }
  | expr_list ','           { $$ = $1; }
  ;
expr_list
  : expr                    { LIST_ONE($$, $1); }
  | expr_list ',' expr      { LIST_ADD($$, $1, $3); }
  ;
args_opt
  : %empty            { LIST_EMPTY($$); }
  | args              { $$ = $1; }
  | args ','          { $$ = $1; }
  ;
args
  : arg               { LIST_ONE($$, $1); }
  | args ',' arg      { LIST_ADD($$, $1, $3); }
  ;
/* arg: expr | name '=' expr */
arg
  : arg_value          { $$ = NEW(Arg); $$->span = @$; $$->value = $1; }
  | IDENT '=' expr     { $$ = NEW(Arg); $$->span = @$; $$->name = $1; $$->name_span = @1; $$->value = $3; }
  ;
arg_value
  : expr
  ;

%%

/* After recovery, brackets opened in the skipped text are no longer open
 * as far as messages are concerned (`let b = (2;` leaves its '(' behind). */
static void forget_brackets(Lexer *lx, Span skipped) {
  while (lx->nopen > 0 && lx->nopen <= MAX_BRACKETS &&
         lx->open[lx->nopen - 1].span.begin >= skipped.begin &&
         lx->open[lx->nopen - 1].span.begin < skipped.end)
    lx->nopen--;
}

static Name reserved_name(Lexer *lx, Span sp) {
  const char *text = lx->start + sp.begin;
  int len = (int)(sp.end - sp.begin);
  if (len == 1 && strchr("RIVPS", *text)) {
    error_at(C, sp, "'%c' is a type letter and cannot be used as a name", *text);
    help(C, "R, I, V, P and S are reserved for types; choose another name");
  } else {
    error_at(C, sp, "'%.*s' is a reserved word and cannot be used as a name", len, text);
    help(C, "choose another name, such as '%.*s_'", len, text);
  }
  return intern(C, text, (size_t)len);
}

static Item *new_item(Lexer *lx, ItemKind kind, Span sp) {
  Item *it = NEW(Item);
  it->kind = kind;
  it->span = sp;
  return it;
}

static void add_item(Lexer *lx, Item *it) {
  if (lx->items_tail)
    lx->items_tail->next = it;
  else
    lx->module->items = it;
  lx->items_tail = it;
}

static Stmt *new_stmt(Lexer *lx, StmtKind kind, Span sp) {
  Stmt *s = NEW(Stmt);
  s->kind = kind;
  s->span = sp;
  return s;
}

static AxisRef *new_axis(Lexer *lx, Name name, Span sp) {
  AxisRef *a = NEW(AxisRef);
  a->name = name;
  a->span = sp;
  return a;
}

static Binding *new_binding(Lexer *lx, Name name, Span sp) {
  Binding *b = NEW(Binding);
  b->name = name;
  b->span = sp;
  return b;
}

static Expr *new_call(Lexer *lx, Expr *callee, Arg *args, Span sp) {
  Expr *e = ast_expr(C, EX_CALL, sp);
  e->lhs = callee;
  e->args = args;
  e->depth = callee->depth;
  for (Arg *a = args; a; a = a->next)
    if (a->value->depth > e->depth)
      e->depth = a->value->depth;
  e->depth++;
  return ast_bound(C, e);
}

static Expr *new_postfix(Lexer *lx, ExprKind kind, Expr *lhs, Expr *rhs, Span sp) {
  Expr *e = ast_expr(C, kind, sp);
  e->lhs = lhs;
  e->rhs = rhs;
  e->depth = 1 + (rhs && rhs->depth > lhs->depth ? rhs->depth : lhs->depth);
  return ast_bound(C, e);
}

static Expr *new_seq(Lexer *lx, ExprKind kind, Expr *elems, Span sp) {
  Expr *e = ast_expr(C, kind, sp);
  e->elems = elems;
  for (Expr *x = elems; x; x = x->next)
    if (x->depth > e->depth)
      e->depth = x->depth;
  e->depth++;
  return ast_bound(C, e);
}

/* ---- syntax errors in words ---- */

/* Whether k is the character token ch, as in '(' */
static bool is_char(yysymbol_kind_t k, char ch) {
  const char *name = yysymbol_name(k);
  return name[0] == '\'' && name[1] == ch && name[2] == '\'';
}

static bool expects_char(const yysymbol_kind_t *exp, int n, char ch) {
  for (int i = 0; i < n; i++)
    if (is_char(exp[i], ch))
      return true;
  return false;
}

static bool expects(const yysymbol_kind_t *exp, int n, yysymbol_kind_t k) {
  for (int i = 0; i < n; i++)
    if (exp[i] == k)
      return true;
  return false;
}

static bool is_keyword(yysymbol_kind_t k) { return k >= YYSYMBOL_MESH && k <= YYSYMBOL_STRUCT; }

static bool is_decl_keyword(yysymbol_kind_t k) {
  return k == YYSYMBOL_FN || k == YYSYMBOL_MESH || k == YYSYMBOL_CONST || k == YYSYMBOL_IMPORT ||
         k == YYSYMBOL_LOCAL || k == YYSYMBOL_EXPORT || k == YYSYMBOL_STRUCT;
}

static bool is_stmt_keyword(yysymbol_kind_t k) {
  return k == YYSYMBOL_LET || k == YYSYMBOL_VAR || k == YYSYMBOL_RETURN || k == YYSYMBOL_FOR ||
         k == YYSYMBOL_IF;
}

/* Words that cannot be names: keywords, dtypes, type letters, true/false. */
static bool is_reserved(yysymbol_kind_t k) {
  return is_keyword(k) || k == YYSYMBOL_DTYPE || k == YYSYMBOL_LTYPE || k == YYSYMBOL_SHARD ||
         k == YYSYMBOL_TRUE || k == YYSYMBOL_FALSE;
}

static bool is_closer(yysymbol_kind_t k) {
  return is_char(k, ')') || is_char(k, ']') || is_char(k, '}') || k == YYSYMBOL_TYPE_RBRACE;
}

static char opener_of(char closer) { return closer == ')' ? '(' : closer == ']' ? '[' : '{'; }

/* What the user sees for a token the parser did not expect. */
static const char *describe_found(Lexer *lx, yysymbol_kind_t k, Span sp) {
  const char *text = lx->start + sp.begin;
  int len = (int)(sp.end - sp.begin);
  if (len > 40)
    len = 40;
  switch (k) {
  case YYSYMBOL_YYEOF: return "end of file";
  case YYSYMBOL_IDENT: return arena_sprintf(&C->arena, "name '%.*s'", len, text);
  case YYSYMBOL_INT:
  case YYSYMBOL_FLOAT: return arena_sprintf(&C->arena, "number %.*s", len, text);
  case YYSYMBOL_STRING: return "a string";
  case YYSYMBOL_DTYPE: return arena_sprintf(&C->arena, "type '%.*s'", len, text);
  case YYSYMBOL_LTYPE:
  case YYSYMBOL_SHARD: return arena_sprintf(&C->arena, "type letter '%.*s'", len, text);
  case YYSYMBOL_TRUE:
  case YYSYMBOL_FALSE: return arena_sprintf(&C->arena, "'%.*s'", len, text);
  default:
    if (is_keyword(k))
      return arena_sprintf(&C->arena, "keyword '%.*s'", len, text);
    if (is_closer(k) && sp.begin == lx->unmatched.begin && sp.file == lx->unmatched.file)
      return arena_sprintf(&C->arena, "'%c' with no matching '%c'", *text, opener_of(*text));
    return arena_sprintf(&C->arena, "'%.*s'", len, text);
  }
}

/* Tokens that can start an expression (with - ! ( [), and the first
 * characters of operators that can follow one: an expected set holding
 * these is summarised in words. */
static const yysymbol_kind_t expr_start[] = {
    YYSYMBOL_INT, YYSYMBOL_FLOAT, YYSYMBOL_STRING, YYSYMBOL_TRUE, YYSYMBOL_FALSE,
    YYSYMBOL_IDENT, YYSYMBOL_LTYPE, YYSYMBOL_SHARD, YYSYMBOL_LOCAL_MAP, YYSYMBOL_DTYPE};
static const char *const operators = "+-*/%@<>.([";

/* Expected sets that have a better name than the list of their tokens. */
static const char *expected_phrase(const yysymbol_kind_t *exp, int n) {
  if (n == 2 && expects(exp, n, YYSYMBOL_IDENT) && expects_char(exp, n, '('))
    return "a mesh axis or a parenthesised list of axes";
  if (n == 2 && expects(exp, n, YYSYMBOL_IDENT) && expects_char(exp, n, '*'))
    return "a mesh axis or '*'";
  if (n == 2 && expects(exp, n, YYSYMBOL_INT) && expects_char(exp, n, '-'))
    return "a dim number such as 0 or -1";
  return NULL;
}

/* One expected token in words. */
static const char *token_words(Lexer *lx, yysymbol_kind_t k) {
  const char *name = yysymbol_name(k);
  switch (k) {
  case YYSYMBOL_IDENT: return "a name";
  case YYSYMBOL_INT: return "an integer";
  case YYSYMBOL_DTYPE: return "a type (f32, f64, i32 or bf16)";
  case YYSYMBOL_LTYPE: return "R, I, V, P";
  case YYSYMBOL_SHARD: return "S(dim)";
  case YYSYMBOL_YYEOF: return "end of file";
  case YYSYMBOL_STRING: return "a string";
  case YYSYMBOL_TYPE_RBRACE: return "'}'";
  default:
    if (name[0] == '\'')
      return arena_sprintf(&C->arena, "'%.*s'", (int)strlen(name) - 2, name + 1);
    return arena_sprintf(&C->arena, "'%s'", name); /* keywords and "==" "->" ".." ... */
  }
}

/* What kind of place the parser was in, judged from the expected set. */
typedef struct Context {
  bool new_name;   /* a name being declared (reserved words are accepted there,
                      then reported by the grammar: not worth suggesting) */
  bool stmt, decl; /* the start of a statement / of a declaration */
  bool expr;       /* the start of an expression */
  bool after_expr; /* after a complete expression: operators could follow */
  bool size;       /* inside `[...]` of a type, where a size goes */
  bool after_size; /* after a size: '@' ',' ']' matter more than arithmetic */
  bool in_args;    /* after a call argument: `name=value` is rarely meant */
  bool any_type;   /* where a type goes: a dtype or a struct's name */
} Context;

static Context context_of(const yysymbol_kind_t *exp, int n) {
  Context x;
  x.new_name = expects(exp, n, YYSYMBOL_IDENT) && expects(exp, n, YYSYMBOL_OVER);
  x.stmt = !x.new_name && expects(exp, n, YYSYMBOL_LET) && expects(exp, n, YYSYMBOL_RETURN);
  x.decl = !x.new_name && expects(exp, n, YYSYMBOL_FN) && expects(exp, n, YYSYMBOL_MESH);
  x.expr = expects(exp, n, YYSYMBOL_INT) && expects(exp, n, YYSYMBOL_IDENT);
  x.after_expr = expects(exp, n, YYSYMBOL_OROR);
  x.size = expects(exp, n, YYSYMBOL_DOTDOT) && expects(exp, n, YYSYMBOL_INT);
  x.after_size = expects_char(exp, n, '@') && expects_char(exp, n, ']') && !x.after_expr;
  x.in_args = expects_char(exp, n, ')') && expects_char(exp, n, ',');
  x.any_type = expects(exp, n, YYSYMBOL_DTYPE) && expects(exp, n, YYSYMBOL_IDENT) && !x.expr && !x.new_name;
  return x;
}

static bool starts_expr(yysymbol_kind_t k) {
  for (size_t j = 0; j < sizeof expr_start / sizeof expr_start[0]; j++)
    if (expr_start[j] == k)
      return true;
  return is_char(k, '-') || is_char(k, '!') || is_char(k, '(') || is_char(k, '[');
}

static bool is_operator(yysymbol_kind_t k) {
  const char *name = yysymbol_name(k);
  return (name[0] == '\'' && name[1] && strchr(operators, name[1])) || k == YYSYMBOL_OROR ||
         k == YYSYMBOL_ANDAND || k == YYSYMBOL_EQ || k == YYSYMBOL_NE || k == YYSYMBOL_LE ||
         k == YYSYMBOL_GE;
}

/* Whether expected token k goes unsaid: covered by the summary word ("a
 * statement", "an expression", ...), or not worth suggesting. */
static bool unsaid(const Context *x, yysymbol_kind_t k) {
  if (k == YYSYMBOL_YYerror || k == YYSYMBOL_TYPE_LBRACE || (k == YYSYMBOL_YYEOF && x->decl))
    return true;
  if ((x->decl || x->stmt) && (is_decl_keyword(k) || is_stmt_keyword(k)))
    return true;
  if ((x->expr || x->stmt || x->size) && starts_expr(k))
    return true;
  if (x->after_expr && is_operator(k))
    return true;
  if (x->after_size && (is_char(k, '*') || is_char(k, '/') || is_char(k, '+') || is_char(k, '-')))
    return true;
  if (x->any_type && k == YYSYMBOL_IDENT)
    return true; /* said with the dtypes */
  return (x->in_args && is_char(k, '=')) || (x->new_name && is_reserved(k));
}

/* The expected set in words, or NULL when it is too long to help.  *level
 * is set when the parser was looking for a statement or a declaration. */
static const char *expected_words(Lexer *lx, const yysymbol_kind_t *exp, int n, bool *level) {
  Context x = context_of(exp, n);
  const char *words[YYNTOKENS + 1];
  int nw = 0;
  *level = x.stmt || x.decl;
  if (expected_phrase(exp, n))
    return expected_phrase(exp, n);
  if (x.decl)
    words[nw++] = "a declaration (fn, struct, mesh, const or import)";
  else if (x.stmt)
    words[nw++] = "a statement";
  else if (x.size)
    words[nw++] = "a size";
  else if (x.expr)
    words[nw++] = "an expression";
  for (int i = 0; i < n; i++)
    if (!unsaid(&x, exp[i]))
      words[nw++] = x.any_type && exp[i] == YYSYMBOL_DTYPE ? "a type (f32, f64, i32, bf16 or a struct's name)"
                                                            : token_words(lx, exp[i]);
  if (nw == 0 || nw > 5)
    return NULL;
  StrBuf sb;
  sb_init(&sb, &C->arena);
  for (int i = 0; i < nw; i++) {
    if (i > 0)
      sb_puts(&sb, i == nw - 1 ? " or " : ", ");
    sb_puts(&sb, words[i]);
  }
  return sb.data;
}

/* The bracket a closer in the expected set would close, if any. */
static int open_bracket(Lexer *lx, yysymbol_kind_t found, const yysymbol_kind_t *exp, int n) {
  int top = lx->nopen - 1;
  if (is_char(found, '(') || is_char(found, '[') || is_char(found, '{') ||
      found == YYSYMBOL_TYPE_LBRACE)
    top--; /* the found token is itself an opener */
  if (top < 0 || top >= MAX_BRACKETS)
    return -1;
  char ch = lx->open[top].ch;
  if (lx->open[top].type)
    return expects(exp, n, YYSYMBOL_TYPE_RBRACE) ? top : -1;
  return expects_char(exp, n, ch == '(' ? ')' : ch == '[' ? ']' : '}') ? top : -1;
}

/* " after 'x'" naming the token before the error, or "" when that would
 * not help (nothing before it, or a long or invented token). */
static const char *after_prev(Lexer *lx) {
  Span p = lx->prev;
  int len = (int)(p.end - p.begin);
  if (!p.file || len == 0 || len > 12 || lx->start[p.begin] == '"')
    return "";
  return arena_sprintf(&C->arena, " after '%.*s'", len, lx->start + p.begin);
}

/* Whether the token before the error ends a statement or a block, so that
 * whatever is missing belongs before the found token, not after it. */
static bool prev_ends_something(Lexer *lx) {
  Span p = lx->prev;
  return p.end - p.begin == 1 && strchr(";{}", lx->start[p.begin]);
}

static void reserved_word_help(Lexer *lx, yysymbol_kind_t found, Span at) {
  const char *text = lx->start + at.begin;
  int len = (int)(at.end - at.begin);
  if (found == YYSYMBOL_LTYPE || found == YYSYMBOL_SHARD)
    help(C, "R, I, V, P and S are type letters and cannot be used as names");
  else if (found == YYSYMBOL_DTYPE)
    help(C, "'%.*s' is a dtype and cannot be used as a name", len, text);
  else
    help(C, "'%.*s' is a reserved word and cannot be used as a name; try '%.*s_'", len, text, len,
         text);
}

static char closer_char(char open) { return open == '(' ? ')' : open == '[' ? ']' : '}'; }

/* A help line for mistakes that the expected set alone does not explain. */
static void explain(Lexer *lx, yysymbol_kind_t found, Span at, const yysymbol_kind_t *exp, int n,
                    bool level) {
  const char *text = lx->start + at.begin;
  int len = (int)(at.end - at.begin);
  Span p = lx->prev;
  if (level && is_decl_keyword(found) && expects(exp, n, YYSYMBOL_RETURN))
    help(C, "'%.*s' declarations belong at the top level, outside functions", len, text);
  else if (level && is_stmt_keyword(found))
    help(C, "statements belong in the body of a function, such as fn main() { ... }");
  else if (level && is_char(found, ';') && p.end - p.begin == 1 && lx->start[p.begin] == '}')
    help_fix(C, at, "", "remove the ';': a block is not followed by one");
  else if (!level && expects(exp, n, YYSYMBOL_IDENT) && is_reserved(found))
    reserved_word_help(lx, found, at);
  else if (expects_char(exp, n, '{') && !expects(exp, n, YYSYMBOL_OROR) &&
           (expects(exp, n, YYSYMBOL_ARROW) || expects_char(exp, n, '[')) &&
           !expects_char(exp, n, '='))
    help(C, "every function has a body in braces, even an empty one: { }");
  else if (found == YYSYMBOL_DTYPE && expects_char(exp, n, ':') && expects_char(exp, n, ','))
    help(C, "a parameter's type follows a ':', as in %.*s: %.*s", (int)(p.end - p.begin), lx->start + p.begin, len,
         text);
  else if (is_char(found, '=') && expects_char(exp, n, ';') && !expects_char(exp, n, '='))
    help(C, "only a variable can be assigned to, as in `x = value;`");
}

/* The message is one of:
 *   expected X at end of file             (at the last token)
 *   expected X after 'p', found Y on line N  (at p: a ';' or closer missing at
 *                                          the end of the line before)
 *   expected X[ after 'p'], found Y         (at the found token)
 *   unexpected Y                           (when the expected set is too long)
 * with a note naming the bracket a missing closer belongs to. */
static int yyreport_syntax_error(const yypcontext_t *ctx, Lexer *lx) {
  enum { NEXP = YYNTOKENS };
  yysymbol_kind_t exp[NEXP];
  int n = yypcontext_expected_tokens(ctx, exp, NEXP);
  if (n < 0)
    n = 0;
  yysymbol_kind_t found = yypcontext_token(ctx);
  Span at = *yypcontext_location(ctx);
  if (at.file == lx->last_error.file && at.begin == lx->last_error.begin && lx->last_error.file)
    return 0;
  lx->last_error = at;
  bool level;
  const char *want = expected_words(lx, exp, n, &level);
  const char *what = describe_found(lx, found, at);
  int ob = open_bracket(lx, found, exp, n);
  int prev_line, prev_col, at_line, at_col;
  Span prev = lx->prev;
  int plen = (int)(prev.end - prev.begin);
  prev.begin = prev.end > prev.begin ? prev.end - 1 : prev.begin;
  source_position(C, prev, &prev_line, &prev_col);
  source_position(C, at, &at_line, &at_col);
  if (found == YYSYMBOL_ELSE && level) {
    error_at(C, at, "'else' without a matching 'if'");
    help(C, "'else' follows the '}' of an if block: if c { ... } else { ... }");
    return 0;
  }
  if (expects_char(exp, n, ';') && want && !level) /* after a complete expression, */
    want = expects_char(exp, n, '=') ? "';' or '='" : "';'"; /* a ';' is what is missing */
  if (found == YYSYMBOL_YYEOF && prev.file && plen > 0) {
    if (ob >= 0)
      want = arena_sprintf(&C->arena, "'%c'", lx->open[ob].ch == '(' ? ')' : lx->open[ob].ch == '[' ? ']' : '}');
    if (want)
      error_at(C, prev, "expected %s at end of file", want);
    else
      error_at(C, prev, "unexpected end of file");
    if (ob < 0 && lx->nopen > 0 && lx->nopen <= MAX_BRACKETS)
      note_at(C, lx->open[lx->nopen - 1].span, "this '%c' is not closed", lx->open[lx->nopen - 1].ch);
  } else if (want && prev.file && plen > 0 && prev_line < at_line && !prev_ends_something(lx) &&
             (expects_char(exp, n, ';') || ob >= 0)) {
    /* What is missing belongs at the end of the line before. */
    error_at(C, prev, "expected %s%s, found %s on line %d", want,
             *after_prev(lx) ? after_prev(lx) : " after this", what, at_line);
  } else if (want) {
    error_at(C, at, "expected %s%s, found %s", want,
             !level && prev.file && prev_line == at_line ? after_prev(lx) : "", what);
  } else {
    error_at(C, at, "unexpected %s", what);
  }
  explain(lx, found, at, exp, n, level);
  if (ob >= 0 && (!level || found == YYSYMBOL_YYEOF))
    note_at(C, lx->open[ob].span, "to close this '%c'", lx->open[ob].ch);
  else if (at.begin == lx->skipped_by.begin && at.file == lx->skipped_by.file &&
           expects_char(exp, n, closer_char(lx->skipped.ch)))
    note_at(C, lx->skipped.span, "to close this '%c'", lx->skipped.ch);
  return 0;
}

static void yyerror(Span *loc, Lexer *lx, const char *msg) {
  if (strstr(msg, "exhausted"))
    error_at(C, *loc, "the program is nested too deeply to parse");
  else
    diag_error_rule(C, "syntax/parse-error", *loc, "%s", msg);
}

Module *parse_file(Compiler *c, int file, Name module_name) {
  SourceFile *f = source_file(c, (uint32_t)file);
  Lexer lexer = {0};
  Lexer *lx = &lexer;
  lx->c = c;
  lx->file = file;
  lx->start = lx->cur = f->text;
  lx->lim = f->text + f->len;
  if (f->len >= 3 && memcmp(f->text, "\xef\xbb\xbf", 3) == 0)
    lx->cur += 3; /* a UTF-8 byte order mark */
  lx->module = NEW(Module);
  lx->module->name = module_name;
  lx->module->file = file;
  yyparse(lx);
  return lx->module;
}
