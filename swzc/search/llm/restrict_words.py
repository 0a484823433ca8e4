"""The words of the safe subset (swzc.search.llm.restrict), as tables the walk (restrict_tree) reads: the names a
body may read, call or never declare, the types it may name, every token it may hold, and what is said of each
construct it may not use.
"""

from __future__ import annotations

import re

from tree_sitter import Node

# -- names --------------------------------------------------------------------------------------------------

_PARAMETERS = ("block", "grid")
_CALLEES = {"min": 2, "max": 2, "make_uint3": 3}
_FIELDS = ("x", "y", "z")
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_KEYWORDS = frozenset("""
    alignas alignof and and_eq asm auto bitand bitor bool break case catch char char8_t char16_t char32_t class
    compl concept const consteval constexpr constinit const_cast continue co_await co_return co_yield decltype
    default delete do double dynamic_cast else enum explicit export extern false float for friend goto if inline
    int long mutable namespace new noexcept not not_eq nullptr operator or or_eq private protected public
    register reinterpret_cast requires return short signed sizeof static static_assert static_cast struct switch
    template this thread_local throw true try typedef typeid typename union unsigned using virtual void volatile
    wchar_t while xor xor_eq""".split())
_RESERVED_NAMES = _KEYWORDS | {*_PARAMETERS, *_CALLEES, "uint3"}


def _reserved(name: str) -> bool:
    return name.startswith("__") or name.startswith("swzc_")


# -- types --------------------------------------------------------------------------------------------------

# The type's words, sorted, to its canonical name.  `long` alone is left out: it is 32 bits on Windows.
_TYPE_NAMES = {
    ("int",): "int",
    ("unsigned",): "unsigned",
    ("int", "unsigned"): "unsigned",
    ("long", "long"): "long long",
    ("int", "long", "long"): "long long",
    ("long", "long", "unsigned"): "unsigned long long",
    ("int", "long", "long", "unsigned"): "unsigned long long",
    ("bool",): "bool",
    ("uint3",): "uint3",
}
_ALLOWED_TYPES = "unsigned, int, unsigned long long, long long, bool, uint3"


# -- tokens -------------------------------------------------------------------------------------------------

_BINARY = frozenset("+ - * / % & | ^ << >> < <= > >= == != && ||".split())
_UNARY = frozenset("- + ! ~".split())
_ASSIGNMENTS = frozenset("= += -= *= /= %= &= |= ^= <<= >>=".split())
_LOOP_CONDITIONS = frozenset("< <= != > >=".split())
_LOOP_STEPS = frozenset("+= -= *= /= <<= >>=".split())
# Every token that may appear in an accepted body: a keyword or operator outside this set (`constexpr` in
# `if constexpr`, `and`, `<<<`) is refused even where the node around it is allowed.
_TOKENS = _BINARY | _UNARY | _ASSIGNMENTS | frozenset(
    "( ) { } ; , . ? : ++ -- if else for return break continue const unsigned long int".split())


# -- constructs outside the subset --------------------------------------------------------------------------

_FORBIDDEN = {
    "while_statement": "while loops are not allowed (use a for loop with a literal bound)",
    "do_statement": "do loops are not allowed (use a for loop with a literal bound)",
    "for_range_loop": "range for loops are not allowed",
    "goto_statement": "goto is not allowed",
    "labeled_statement": "labels are not allowed",
    "switch_statement": "switch is not allowed (use if/else)",
    "case_statement": "switch is not allowed (use if/else)",
    "try_statement": "try is not allowed",
    "throw_statement": "throw is not allowed",
    "lambda_expression": "lambdas are not allowed",
    "function_definition": "nested functions are not allowed",
    "template_declaration": "templates are not allowed",
    "template_function": "template arguments are not allowed",
    "struct_specifier": "struct definitions are not allowed",
    "class_specifier": "class definitions are not allowed",
    "union_specifier": "union definitions are not allowed",
    "enum_specifier": "enum definitions are not allowed",
    "type_definition": "typedef is not allowed",
    "alias_declaration": "using is not allowed",
    "using_declaration": "using is not allowed",
    "namespace_definition": "namespaces are not allowed",
    "namespace_alias_definition": "namespaces are not allowed",
    "static_assert_declaration": "static_assert is not allowed",
    "new_expression": "new is not allowed (no memory)",
    "delete_expression": "delete is not allowed (no memory)",
    "sizeof_expression": "sizeof is not allowed",
    "alignof_expression": "alignof is not allowed",
    "offsetof_expression": "offsetof is not allowed",
    "decltype": "decltype is not allowed",
    "pointer_expression": "address-of (&) and dereference (*) are not allowed (no pointers)",
    "subscript_expression": "subscripts are not allowed (no arrays or pointers)",
    "this": "this is not allowed",
    "null": "nullptr is not allowed (no pointers)",
    "comma_expression": "comma expressions are not allowed",
    "string_literal": "quotes are not allowed (no string or character literals)",
    "raw_string_literal": "quotes are not allowed (no string or character literals)",
    "concatenated_string": "quotes are not allowed (no string or character literals)",
    "char_literal": "quotes are not allowed (no string or character literals)",
    "user_defined_literal": "user-defined literals are not allowed",
    "compound_literal_expression": "brace initialisers are not allowed (use make_uint3 or =)",
    "initializer_list": "brace initialisers are not allowed (use make_uint3 or =)",
    "qualified_identifier": "qualified names (::) are not allowed",
    "co_await_expression": "coroutines are not allowed",
    "co_return_statement": "coroutines are not allowed",
    "co_yield_statement": "coroutines are not allowed",
    "attributed_statement": "attributes are not allowed",
    "attribute_declaration": "attributes are not allowed",
    "kernel_call_syntax": "kernel launches are not allowed",
    "template_type": "templates are not allowed",
}
_DECLARATORS = {
    "pointer_declarator": "pointers are not allowed",
    "reference_declarator": "references are not allowed",
    "array_declarator": "arrays are not allowed",
    "function_declarator": "function declarations are not allowed",
    "abstract_pointer_declarator": "casts to pointers are not allowed",
    "abstract_reference_declarator": "casts to references are not allowed",
    "abstract_array_declarator": "casts to arrays are not allowed",
    "abstract_function_declarator": "casts to functions are not allowed",
}


def _forbidden(node: Node) -> str:
    if "asm" in node.type:
        return "asm is not allowed (only integer arithmetic)"
    known = _FORBIDDEN.get(node.type) or _DECLARATORS.get(node.type)
    return known or f"{node.type.replace('_', ' ')} is not allowed here"
