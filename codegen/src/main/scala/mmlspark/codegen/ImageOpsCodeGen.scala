package mmlspark.codegen

import mmlspark.opencv.{FieldType, ImageOp, OpField, OpRule, OpSpec}

/** Writes `mmlspark/opencv/_ImageOps.py` from the image operation registry ([[ImageOp.registry]]):
  * one fluent method per operation, its keyword arguments, types and defaults those of the case
  * class, the OpenCV constants the operations take as named constants, and a table of the
  * operations for tests. `ImageTransformer` (hand-written) mixes the class in.
  */
object ImageOpsCodeGen {

  val path = "mmlspark/opencv/_ImageOps.py"

  private def methodName(s: OpSpec[_]): String = if (s.fluent) s.name else "_" + s.name

  private def default(f: OpField): Option[String] = f.default.map { d =>
    (f.constants, d) match {
      case (Some(c), i: Int) => c.nameOf(i).getOrElse(f.fieldType.pythonLiteral(d))
      case _ => f.fieldType.pythonLiteral(d)
    }
  }

  private def method(s: OpSpec[_]): String = {
    val params = s.fields.map { f =>
      s"${f.name}: ${f.fieldType.pythonType}" + default(f).map(d => s" = $d").getOrElse("")
    }
    val paramDocs = s.fields.map { f =>
      val values = f.constants.map(c => s" ({${c.describe}})").getOrElse("")
      val dflt = default(f).map(d => s" Default: ``$d``.").getOrElse("")
      s"        ${f.name} : ${f.fieldType.pythonType}\n            ${f.doc}$values.$dflt"
    }
    val args = s.fields.map(f => s"${f.name}=${f.fieldType.pythonConvert(f.name)}")
    s"""    def ${methodName(s)}(
       |        self: _O,
       |${params.map(p => s"        $p,\n").mkString}    ) -> _O:
       |        \"\"\"${s.doc}
       |
       |        Appends ``{"op": "${s.name}", ...}`` to ``operations``.
       |
       |        Parameters
       |        ----------
       |${paramDocs.mkString("\n")}
       |        \"\"\"
       |        return self._add(
       |            "${s.name}",
       |${args.map(a => s"            $a,\n").mkString}        )
       |""".stripMargin
  }

  private def strings(values: Iterable[String]): String =
    values.map(PyCodeGen.stringLiteral).mkString("[", ", ", "]")

  /** The names of the fields that hold a size (height, width) of the operation, read off its
    * example, whose integer fields hold distinct values.
    */
  private def sizeFields(s: OpSpec[_ <: ImageOp], size: Option[(Int, Int)]): String = size match {
    case None => "None"
    case Some((height, width)) =>
      val ints = s.fields
        .filter(_.fieldType == FieldType.IntField)
        .map(f => f.name -> s.cls.getMethod(f.name).invoke(s.example))
      def name(value: Int): String = ints
        .collectFirst { case (n, v) if v == value => n }
        .getOrElse(sys.error(s"codegen: no field of ${s.name}'s example holds the size $value"))
      strings(Seq(name(height), name(width)))
  }

  private def rule(r: OpRule): String = {
    val spelling = r.spelling
      .map { c =>
        val pairs = c.resolutions.toSeq.sorted.map { case (k, v) =>
          s"${PyCodeGen.stringLiteral(k)}: ${PyCodeGen.stringLiteral(v)}"
        }
        s""", "spelling": {${pairs.mkString(", ")}}"""
      }
      .getOrElse("")
    s"""            {"kind": "${r.kind.name}", "fields": ${strings(r.fields)}, "message": """ +
      s"""${PyCodeGen.stringLiteral(r.message)}, "choices": ${strings(r.choices)}$spelling},\n"""
  }

  private def table(s: OpSpec[_ <: ImageOp]): String = {
    val example = s.example.asInstanceOf[Product].productIterator.toSeq
    val fields = s.fields.map(f => PyCodeGen.stringLiteral(f.name)).mkString(", ")
    val defaults = s.fields
      .flatMap(f => f.default.map(d => s"\"${f.name}\": ${f.fieldType.pythonLiteral(d)}"))
      .mkString(", ")
    val types = s.fields.map(f => s"\"${f.name}\": \"${f.fieldType.pythonType}\"").mkString(", ")
    val examples = s.fields
      .zip(example)
      .map { case (f, v) => s"\"${f.name}\": ${f.fieldType.pythonLiteral(v)}" }
      .mkString(", ")
    s"""    "${s.name}": {
       |        "method": "${methodName(s)}",
       |        "fields": [$fields],
       |        "defaults": {$defaults},
       |        "example": {$examples},
       |        "types": {$types},
       |        "fixedSize": ${sizeFields(s, s.example.fixedSize)},
       |        "minInputSize": ${sizeFields(s, s.example.minInputSize)},
       |        "changesSize": ${PyCodeGen.literal(s.example.changesSize)},
       |        "pixelwise": ${PyCodeGen.literal(s.example.pixelwise)},
       |        "rules": [
       |${s.rules.map(rule).mkString}        ],
       |    },
       |""".stripMargin
  }

  def pythonSource: String = {
    val constants = ImageOp.registry
      .flatMap(_.fields.flatMap(_.constants))
      .distinct
      .map(_.values.map { case (n, v) => s"$n = $v" }.mkString("\n"))
    val constantNames = ImageOp.registry
      .flatMap(_.fields.flatMap(_.constants))
      .distinct
      .flatMap(_.values.map(_._1))
    val exported = (Seq("OPERATIONS") ++ constantNames).map(n => "\"" + n + "\"").mkString(", ")
    s"""${PyCodeGen.header("the image operation registry mmlspark.opencv.ImageOp")}
       |\"\"\"The fluent methods of ``ImageTransformer``, one per image operation, and the OpenCV
       |constants they take.\"\"\"
       |
       |from __future__ import annotations
       |
       |from collections.abc import Sequence
       |from typing import Any, TypeVar
       |
       |__all__ = [$exported]
       |
       |${constants.mkString("\n\n")}
       |
       |# Every operation: its method, fields in order, defaults, a valid example, the fields' types,
       |# the fields that hold its output size (fixedSize) and the least input size a smaller decode
       |# must keep (minInputSize), whether it changes the size or works pixel by pixel, and the rules
       |# its arguments keep (each a kind the engine checks, the fields it reads and the message of a
       |# value that breaks it: {field} is the value as Java prints it, {field.length} a list's).
       |OPERATIONS: dict[str, dict[str, Any]] = {
       |${ImageOp.registry.map(table).mkString}}
       |
       |_O = TypeVar("_O", bound="_ImageOps")
       |
       |
       |class _ImageOps:
       |    \"\"\"Fluent methods that each append one operation to ``operations`` and return the stage.\"\"\"
       |
       |    def _add(self: _O, op: str, **args: Any) -> _O:
       |        raise NotImplementedError
       |
       |${ImageOp.registry.map(method).mkString("\n")}""".stripMargin
  }
}
