package mmlspark.codegen

/** The Python mixins of the shared params, twins of the Scala traits that the build writes from the
  * same table ([[SharedParams.table]], in `project/SharedParamsSpec.scala`).
  */
object SharedParamsCodeGen {

  /** The package of the generated Scala traits. */
  val scalaPackage = "mmlspark.contracts"

  /** The shared params whose traits `cls` mixes in, found among its own interfaces (directly or
    * through a superclass or another trait), in table order.
    */
  def of(cls: Class[_]): Seq[SharedParam] = {
    def interfaces(c: Class[_]): Set[Class[_]] =
      if (c == null) Set.empty
      else
        c.getInterfaces.toSet.flatMap((i: Class[_]) => interfaces(i) + i) ++
          interfaces(c.getSuperclass)
    val names = interfaces(cls).map(_.getName)
    SharedParams.table.filter(p => names.contains(s"$scalaPackage.${p.traitName}"))
  }

  def pythonSource(rows: Seq[SharedParam] = SharedParams.table): String = {
    val mixins = rows.map { p =>
      val t = p.paramType
      val cap = p.name.capitalize
      s"""class ${p.traitName}(Params):
         |    \"\"\"Mixin for shared param ``${p.name}``: ${p.doc}.\"\"\"
         |
         |    ${p.name}: "Param[${t.pythonType}]" = Param(
         |        Params._dummy(),
         |        "${p.name}",
         |        ${PyCodeGen.stringLiteral(p.doc)},
         |        typeConverter=${t.pythonConverter},
         |    )
         |
         |    def get$cap(self) -> ${t.pythonType}:
         |        \"\"\"Gets the value of ``${p.name}`` or its default.\"\"\"
         |        return self.getOrDefault(self.${p.name})
         |
         |    def set$cap(self: _P, value: ${t.pythonType}) -> _P:
         |        \"\"\"Sets ``${p.name}``: ${p.doc}.\"\"\"
         |        return self._set(${p.name}=value)
         |""".stripMargin
    }
    s"""# ${SharedParams.header}
       |\"\"\"Shared param mixins, twins of the Scala traits in ``mmlspark.contracts``.\"\"\"
       |
       |from __future__ import annotations
       |
       |from typing import TypeVar
       |
       |from pyspark.ml.param import Param, Params, TypeConverters
       |
       |__all__ = [${rows.map(p => "\"" + p.traitName + "\"").mkString(", ")}]
       |
       |_P = TypeVar("_P", bound=Params)
       |
       |
       |${mixins.mkString("\n\n")}""".stripMargin
  }
}
